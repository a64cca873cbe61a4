// `matchbook-bench queues`: the queue study (see queue_study.h and
// docs/queues.md).
//
// One cell = one queue, one mode (MPSC: P producers, 1 consumer; MPMC: P
// producers, C consumers, C = P as in the study unless --mpmc-consumers says
// otherwise), one capacity. Every thread calls its side's non-blocking
// operation in a loop, as fast as it can, the way the study's JMH threads
// called offer(e) / poll() for 10 s:
//
//   producer:  for (;;) { if (offer(v)) { sum += v; ok++ } else failures++ }
//   consumer:  for (;;) { if (poll(&v)) { sum += v; ok++ } else empty++ }
//
// Each thread keeps its counts in its own cache-line pair; the main thread
// reads all of them (and every thread's CPU clock) at the start and at the end
// of the timed window, after a warm-up. Setup (allocating and touching the
// preallocated storage, starting the threads) and teardown are outside the
// window. After the threads stop, the main thread drains the queue and checks
// that every element offered was polled exactly once (count and checksum).
//
// Figures, per cell:
//   ops/ms          offer() + poll() calls in the window / window ms, failed
//                   and empty calls included: JMH's throughput, the study's
//                   figure.
//   moved/ms        successful polls / window ms: elements through the queue.
//   offer failures  offers refused because the queue was full.
//   producer share  offer calls / all calls (the study's "생산 비중"; consumer
//                   share = 1 - it). CPU shares, from CLOCK_THREAD_CPUTIME_ID
//                   clocks, are printed beside them.
//   lock waits      contended lock acquisitions (and time in them) by producers
//                   (offer) and consumers (poll, and LinkedTwoLock's
//                   signalNotFull), for the two lock-based queues.
//   ctx switches    of all the cell's threads, from a perf software counter
//                   (when the kernel allows perf_event_open).
//   cores busy      CPU time of all the cell's threads / window.
//   IPC             instructions / cycles of all threads from perf hardware
//                   counters, when the machine has them (the 2-vCPU VM this
//                   was written on has none, and the program says so).
//
// Thread safety: the study's main thread owns everything; worker threads touch
// only their queue, their WorkerSlot and the Control flags.
#include "queue_study.h"

#include <concurrentqueue/concurrentqueue.h>
#include <fmt/core.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <boost/lockfree/queue.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cli.h"
#include "common/json_escape.h"
#include "common/status.h"
#include "concurrency/ring.h"

namespace mb::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
using Value = uint64_t;  // the element: one word, like the study's message reference

constexpr uint64_t kStudyBaseCapacity = 20'000'000;  // the study's 100%
constexpr int64_t kRingBatch = 1024;                 // most slots one Available() hands out

// ------------------------------------------------------------------ queues

enum class QueueKind : uint8_t {
  kArrayOneLock,
  kLinkedTwoLock,
  kMoodycamel,
  kBoostLockfree,
  kRing
};
enum class Mode : uint8_t { kMpsc, kMpmc };

constexpr QueueKind kAllQueues[] = {QueueKind::kArrayOneLock, QueueKind::kLinkedTwoLock,
                                    QueueKind::kMoodycamel, QueueKind::kBoostLockfree,
                                    QueueKind::kRing};

std::string_view Name(QueueKind q) {
  switch (q) {
    case QueueKind::kArrayOneLock:
      return "array_one_lock";
    case QueueKind::kLinkedTwoLock:
      return "linked_two_lock";
    case QueueKind::kMoodycamel:
      return "moodycamel";
    case QueueKind::kBoostLockfree:
      return "boost_lockfree";
    case QueueKind::kRing:
      return "mpsc_ring";
  }
  return "?";
}

std::string_view Name(Mode m) { return m == Mode::kMpsc ? "mpsc" : "mpmc"; }

// SVG bar colours, one per queue.
std::string_view Colour(QueueKind q) {
  switch (q) {
    case QueueKind::kArrayOneLock:
      return "#d62728";
    case QueueKind::kLinkedTwoLock:
      return "#ff7f0e";
    case QueueKind::kMoodycamel:
      return "#2ca02c";
    case QueueKind::kBoostLockfree:
      return "#9467bd";
    case QueueKind::kRing:
      return "#1f77b4";
  }
  return "#000000";
}

std::optional<QueueKind> ParseQueue(std::string_view s) {
  for (QueueKind q : kAllQueues) {
    if (s == Name(q)) return q;
  }
  if (s == "array" || s == "abq") return QueueKind::kArrayOneLock;
  if (s == "linked" || s == "lbq") return QueueKind::kLinkedTwoLock;
  if (s == "boost") return QueueKind::kBoostLockfree;
  if (s == "ring") return QueueKind::kRing;
  return std::nullopt;
}

// Every adapter below has the same shape:
//   explicit Adapter(std::size_t capacity, uint32_t producers, uint32_t consumers)
//   std::size_t capacity() const           the capacity actually built
//   Adapter::Producer(Adapter*)  .Offer(v)  one per producer thread
//   Adapter::Consumer(Adapter*)  .Poll(&v)  one per consumer thread

template <class Q>
class LockedAdapter {
 public:
  LockedAdapter(std::size_t capacity, uint32_t, uint32_t) : q_(capacity) {}
  std::size_t capacity() const { return q_.capacity(); }

  class Producer {
   public:
    explicit Producer(LockedAdapter* a) : q_(&a->q_) {}
    bool Offer(Value v) { return q_->TryOffer(v); }

   private:
    Q* q_;
  };
  class Consumer {
   public:
    explicit Consumer(LockedAdapter* a) : q_(&a->q_) {}
    bool Poll(Value* v) { return q_->TryPoll(v); }

   private:
    Q* q_;
  };

 private:
  Q q_;
};

using ArrayAdapter = LockedAdapter<ArrayOneLockQueue<Value>>;
using LinkedAdapter = LockedAdapter<LinkedTwoLockQueue<Value>>;

// moodycamel::ConcurrentQueue made bounded: the one-argument constructor
// preallocates ceil(capacity / 32) blocks of 32 elements, and try_enqueue()
// never allocates, so it fails when it needs a new block and none is free.
// Each producer enqueues through its own ProducerToken (the library's fast
// path) and keeps the blocks it has taken: it reuses them only in order, only
// once every element in the next one has been consumed, and never returns
// them to the shared pool. So the bound is per producer, and try_enqueue can
// refuse while the queue as a whole holds far fewer than `capacity` elements
// (docs/queues.md). Consumers dequeue through ConsumerTokens.
class MoodycamelAdapter {
 public:
  MoodycamelAdapter(std::size_t capacity, uint32_t, uint32_t) : q_(capacity), capacity_(capacity) {}
  std::size_t capacity() const { return capacity_; }

  class Producer {
   public:
    explicit Producer(MoodycamelAdapter* a) : q_(&a->q_), token_(a->q_) {}
    bool Offer(Value v) { return q_->try_enqueue(token_, v); }

   private:
    moodycamel::ConcurrentQueue<Value>* q_;
    moodycamel::ProducerToken token_;
  };
  class Consumer {
   public:
    explicit Consumer(MoodycamelAdapter* a) : q_(&a->q_), token_(a->q_) {}
    bool Poll(Value* v) { return q_->try_dequeue(token_, *v); }

   private:
    moodycamel::ConcurrentQueue<Value>* q_;
    moodycamel::ConsumerToken token_;
  };

 private:
  moodycamel::ConcurrentQueue<Value> q_;
  std::size_t capacity_;
};

// boost::lockfree::queue(n) allocates its n nodes one at a time through its
// allocator (64-byte aligned, memset): 14 s for 20 M nodes with the default
// allocator on this VM. NodeArena hands them out of one mapping instead,
// populated up front (MAP_POPULATE: no page fault per 4 KiB page), and
// unmaps them all at once. Only the queue's constructor allocates:
// bounded_push() takes nodes from the queue's free list and fails when it is
// empty, and deallocation is a no-op.
class NodeArena {
 public:
  static constexpr std::size_t kAlign = 64;
  explicit NodeArena(std::size_t bytes) : size_(bytes) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    MB_CHECK(p != MAP_FAILED);
    base_ = static_cast<std::byte*>(p);
  }
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;
  ~NodeArena() { munmap(base_, size_); }

  void* Allocate(std::size_t bytes, std::size_t align) {
    std::size_t at = (used_ + align - 1) / align * align;
    MB_CHECK(align <= kAlign && at + bytes <= size_);
    used_ = at + bytes;
    return base_ + at;
  }

  // The arena the allocators draw from while a queue is being built (the
  // boost constructor that takes an allocator object cannot be called: its
  // allocator parameter's type is not deducible). Main thread only.
  static NodeArena*& Current() {
    static NodeArena* current = nullptr;
    return current;
  }

 private:
  std::size_t size_;
  std::size_t used_ = 0;
  std::byte* base_ = nullptr;  // page-aligned, so kAlign-aligned
};

template <class T>
struct ArenaAllocator {
  using value_type = T;
  ArenaAllocator() = default;
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly
  T* allocate(std::size_t n) {
    NodeArena* arena = NodeArena::Current();
    MB_CHECK(arena != nullptr);  // only the queue's constructor allocates
    return static_cast<T*>(arena->Allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T*, std::size_t) noexcept {}
  friend bool operator==(const ArenaAllocator&, const ArenaAllocator&) { return true; }
};

class BoostAdapter {
  using Queue = boost::lockfree::queue<Value, boost::lockfree::allocator<ArenaAllocator<Value>>>;

 public:
  BoostAdapter(std::size_t capacity, uint32_t, uint32_t)
      : arena_((capacity + 2) * kNodeBytes), q_(Build(&arena_, capacity)), capacity_(capacity) {
    NodeArena::Current() = nullptr;
  }
  ~BoostAdapter() {
    q_.reset();  // before the arena that holds its nodes
  }
  std::size_t capacity() const { return capacity_; }

  class Producer {
   public:
    explicit Producer(BoostAdapter* a) : q_(a->q_.get()) {}
    bool Offer(Value v) { return q_->bounded_push(v); }

   private:
    Queue* q_;
  };
  class Consumer {
   public:
    explicit Consumer(BoostAdapter* a) : q_(a->q_.get()) {}
    bool Poll(Value* v) { return q_->pop(*v); }

   private:
    Queue* q_;
  };

 private:
  static constexpr std::size_t kNodeBytes = 64;  // a node is cache-line aligned
  static std::unique_ptr<Queue> Build(NodeArena* arena, std::size_t capacity) {
    NodeArena::Current() = arena;
    return std::make_unique<Queue>(capacity);  // capacity nodes + the dummy
  }

  NodeArena arena_;
  std::unique_ptr<Queue> q_;
  std::size_t capacity_;
};

// The inbound ring. Its capacity must be a power of two: the requested one is
// rounded up. Producers TryPublish(); the consumer takes a batch of up to
// kRingBatch published slots with Available() and hands them out one Poll()
// at a time, releasing the batch when it asks for the next one (Release()
// writes the cursor producers read, so it is not written per element nor on
// an empty poll). Each element counts as one poll, an empty Available() as
// one empty poll. MPSC only.
class RingAdapter {
 public:
  RingAdapter(std::size_t capacity, uint32_t, uint32_t consumers) : ring_(std::bit_ceil(capacity)) {
    MB_CHECK(consumers == 1);
    // Touch the slots now (the published flags the ring touches itself), as
    // the other preallocated queues are touched in setup.
    for (std::size_t i = 0; i < ring_.capacity(); ++i) ring_.Slot(static_cast<int64_t>(i)) = 0;
  }
  std::size_t capacity() const { return ring_.capacity(); }

  class Producer {
   public:
    explicit Producer(RingAdapter* a) : ring_(&a->ring_) {}
    bool Offer(Value v) { return ring_->TryPublish(v); }

   private:
    concurrency::MpscRing<Value>* ring_;
  };
  class Consumer {
   public:
    explicit Consumer(RingAdapter* a)
        : ring_(&a->ring_), cur_(ring_->next()), end_(cur_), released_(cur_) {}
    Consumer(const Consumer&) = delete;
    Consumer& operator=(const Consumer&) = delete;
    ~Consumer() {
      if (cur_ != released_) ring_->Release(cur_);
    }
    bool Poll(Value* v) {
      if (cur_ == end_) {
        if (cur_ != released_) {
          ring_->Release(cur_);
          released_ = cur_;
        }
        end_ = ring_->Available(kRingBatch);
        if (cur_ == end_) return false;
      }
      *v = ring_->Slot(cur_++);
      return true;
    }

   private:
    concurrency::MpscRing<Value>* ring_;
    int64_t cur_;       // next slot to hand out
    int64_t end_;       // end of the current batch
    int64_t released_;  // last value given to Release()
  };

 private:
  concurrency::MpscRing<Value> ring_;
};

// ------------------------------------------------------------------ perf counters

// One perf counter on the calling thread, disabled until Start(). With
// `inherit` it also counts every thread the calling thread creates after
// opening it, and Read() returns the sum.
class PerfCounter {
 public:
  PerfCounter() = default;
  PerfCounter(PerfCounter&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  PerfCounter& operator=(PerfCounter&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  PerfCounter(const PerfCounter&) = delete;
  PerfCounter& operator=(const PerfCounter&) = delete;
  ~PerfCounter() {
    if (fd_ >= 0) close(fd_);
  }

  // Returns 0 or the errno of perf_event_open.
  int Open(uint32_t type, uint64_t config, bool inherit, bool exclude_kernel) {
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = type;
    attr.config = config;
    attr.disabled = 1;
    attr.inherit = inherit ? 1 : 0;
    attr.exclude_kernel = exclude_kernel ? 1 : 0;
    attr.exclude_hv = 1;
    const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return errno;
    fd_ = static_cast<int>(fd);
    return 0;
  }
  bool ok() const { return fd_ >= 0; }
  void Start() {
    if (fd_ < 0) return;
    ioctl(fd_, PERF_EVENT_IOC_RESET, 0);
    ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0);
  }
  void Stop() {
    if (fd_ >= 0) ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);
  }
  std::optional<uint64_t> Read() const {
    uint64_t v = 0;
    if (fd_ < 0 || read(fd_, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return std::nullopt;
    return v;
  }

 private:
  int fd_ = -1;
};

struct CounterSupport {
  bool hardware = false;  // instructions + cycles
  bool hw_exclude_kernel = false;
  std::string hardware_note;  // what the program prints about them
  bool context_switches = false;
  std::string context_note;
};

CounterSupport ProbeCounters() {
  CounterSupport s;
  PerfCounter ins;
  int err = ins.Open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, false, false);
  if (err == EACCES || err == EPERM) {
    s.hw_exclude_kernel = true;
    err = ins.Open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, false, true);
  }
  PerfCounter cyc;
  if (err == 0)
    err = cyc.Open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, false, s.hw_exclude_kernel);
  if (err != 0) {
    s.hardware_note = fmt::format("unsupported on this machine ({})", std::strerror(err));
  } else {
    ins.Start();
    cyc.Start();
    volatile uint64_t sink = 0;
    for (uint64_t i = 0; i < 1'000'000; ++i) sink = sink + i;
    ins.Stop();
    cyc.Stop();
    const auto i = ins.Read();
    const auto c = cyc.Read();
    if (!i || !c || *i == 0 || *c == 0) {
      s.hardware_note = "unsupported on this machine (the counters open but count nothing)";
    } else {
      s.hardware = true;
      s.hardware_note = fmt::format("instructions and cycles of all threads in the window ({})",
                                    s.hw_exclude_kernel ? "user space only" : "user + kernel");
    }
  }
  PerfCounter cs;
  err = cs.Open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, false, false);
  if (err != 0) {
    s.context_note = fmt::format("unavailable ({})", std::strerror(err));
  } else {
    s.context_switches = true;
    s.context_note = "counted for all threads in the window (perf software counter)";
  }
  return s;
}

// ------------------------------------------------------------------ one cell

struct CellSpec {
  QueueKind queue = QueueKind::kArrayOneLock;
  Mode mode = Mode::kMpsc;
  uint32_t producers = 0;
  uint32_t consumers = 0;
  uint64_t capacity = 0;
  uint64_t warmup_ms = 0;
  uint64_t duration_ms = 0;
};

struct CellResult {
  CellSpec spec;
  uint64_t actual_capacity = 0;
  double window_ms = 0;
  uint64_t offers_ok = 0;
  uint64_t offer_failures = 0;
  uint64_t polls_ok = 0;
  uint64_t polls_empty = 0;
  uint64_t producer_cpu_ns = 0;
  uint64_t consumer_cpu_ns = 0;
  uint64_t offer_lock_waits = 0;
  uint64_t offer_lock_wait_ns = 0;
  uint64_t poll_lock_waits = 0;
  uint64_t poll_lock_wait_ns = 0;
  std::optional<uint64_t> context_switches;
  std::optional<uint64_t> instructions;
  std::optional<uint64_t> cycles;
  uint64_t left_in_queue = 0;  // drained after the threads stopped
  double setup_ms = 0;
  double teardown_ms = 0;

  uint64_t offers() const { return offers_ok + offer_failures; }
  uint64_t polls() const { return polls_ok + polls_empty; }
  uint64_t ops() const { return offers() + polls(); }
  double ops_per_ms() const { return static_cast<double>(ops()) / window_ms; }
  double moved_per_ms() const { return static_cast<double>(polls_ok) / window_ms; }
  double Share(uint64_t part, uint64_t whole) const {
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
  }
  double producer_share() const { return Share(offers(), ops()); }
  double consumer_share() const { return Share(polls(), ops()); }
  double offer_failure_rate() const { return Share(offer_failures, offers()); }
  double producer_cpu_share() const {
    return Share(producer_cpu_ns, producer_cpu_ns + consumer_cpu_ns);
  }
  double consumer_cpu_share() const {
    return Share(consumer_cpu_ns, producer_cpu_ns + consumer_cpu_ns);
  }
  // CPU time of all the cell's threads / window: how many cores it had. Below
  // the machine's core count, something else was running (or threads slept).
  double cores_busy() const {
    return static_cast<double>(producer_cpu_ns + consumer_cpu_ns) / (window_ms * 1e6);
  }
  std::optional<double> ipc() const {
    if (!instructions || !cycles || *cycles == 0) return std::nullopt;
    return static_cast<double>(*instructions) / static_cast<double>(*cycles);
  }
};

// One worker's counters, alone on its cache lines. ok/fail and the lock
// counters are written by the worker only and read by the main thread during
// the run; the rest is written by the worker before it exits and read after
// join, or written by the main thread before the run.
struct alignas(2 * concurrency::kCacheLine) WorkerSlot {
  std::atomic<uint64_t> ok{0};    // successful offers / polls
  std::atomic<uint64_t> fail{0};  // refused offers / empty polls
  LockWaitCounters lock;
  uint64_t total_ok = 0;  // over the whole run, warm-up and tail included
  uint64_t checksum = 0;  // sum of the values offered / polled (mod 2^64)
  clockid_t cpu_clock{};
};

struct Control {
  std::atomic<uint32_t> ready{0};  // workers that have built their handle
  std::atomic<uint32_t> go{0};
  alignas(2 * concurrency::kCacheLine) std::atomic<uint32_t> stop{0};
};

void Arrive(Control* ctl) {
  ctl->ready.fetch_add(1, std::memory_order_acq_rel);
  ctl->ready.notify_one();
  ctl->go.wait(0, std::memory_order_acquire);
}

template <class Q>
void ProducerMain(Q* q, WorkerSlot* slot, Control* ctl, uint64_t base) {
  typename Q::Producer p(q);
  tls_lock_wait_counters = &slot->lock;
  Arrive(ctl);
  uint64_t seq = 0;
  uint64_t fail = 0;
  uint64_t sum = 0;
  while (ctl->stop.load(std::memory_order_relaxed) == 0) {
    const Value v = base + seq;
    if (p.Offer(v)) {
      sum += v;
      slot->ok.store(++seq, std::memory_order_relaxed);
    } else {
      slot->fail.store(++fail, std::memory_order_relaxed);
    }
  }
  tls_lock_wait_counters = nullptr;
  slot->total_ok = seq;
  slot->checksum = sum;
}

template <class Q>
void ConsumerMain(Q* q, WorkerSlot* slot, Control* ctl) {
  typename Q::Consumer c(q);
  tls_lock_wait_counters = &slot->lock;
  Arrive(ctl);
  uint64_t ok = 0;
  uint64_t empty = 0;
  uint64_t sum = 0;
  while (ctl->stop.load(std::memory_order_relaxed) == 0) {
    Value v = 0;
    if (c.Poll(&v)) {
      sum += v;
      slot->ok.store(++ok, std::memory_order_relaxed);
    } else {
      slot->fail.store(++empty, std::memory_order_relaxed);
    }
  }
  tls_lock_wait_counters = nullptr;
  slot->total_ok = ok;
  slot->checksum = sum;
}

struct Snapshot {
  SteadyClock::time_point at;
  std::vector<uint64_t> ok, fail, waits, wait_ns, cpu_ns;
};

Snapshot Take(const WorkerSlot* slots, uint32_t n) {
  Snapshot s;
  s.ok.resize(n);
  s.fail.resize(n);
  s.waits.resize(n);
  s.wait_ns.resize(n);
  s.cpu_ns.resize(n);
  s.at = SteadyClock::now();
  for (uint32_t i = 0; i < n; ++i) {
    s.ok[i] = slots[i].ok.load(std::memory_order_relaxed);
    s.fail[i] = slots[i].fail.load(std::memory_order_relaxed);
    s.waits[i] = slots[i].lock.waits.load(std::memory_order_relaxed);
    s.wait_ns[i] = slots[i].lock.wait_ns.load(std::memory_order_relaxed);
  }
  for (uint32_t i = 0; i < n; ++i) {
    timespec ts{};
    if (clock_gettime(slots[i].cpu_clock, &ts) == 0) {
      s.cpu_ns[i] =
          static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
    }
  }
  return s;
}

double MsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

template <class Q>
CellResult RunCell(const CellSpec& spec, const CounterSupport& support) {
  CellResult r;
  r.spec = spec;
  const auto t_setup = SteadyClock::now();
  auto q =
      std::make_unique<Q>(static_cast<std::size_t>(spec.capacity), spec.producers, spec.consumers);
  r.actual_capacity = q->capacity();
  const uint32_t n = spec.producers + spec.consumers;
  auto slots = std::make_unique<WorkerSlot[]>(n);
  Control ctl;

  // Opened before the threads exist, so that they inherit the counters.
  PerfCounter ctx_switches, instructions, cycles;
  if (support.context_switches) {
    (void)ctx_switches.Open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, true, false);
  }
  if (support.hardware) {
    (void)instructions.Open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, true,
                            support.hw_exclude_kernel);
    (void)cycles.Open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, true,
                      support.hw_exclude_kernel);
  }

  std::vector<std::thread> threads;
  threads.reserve(n);
  for (uint32_t i = 0; i < spec.producers; ++i) {
    // Producer i offers (i + 1) * 2^40 + 0, 1, 2, ...: distinct values.
    threads.emplace_back(ProducerMain<Q>, q.get(), &slots[i], &ctl, uint64_t{i + 1} << 40);
  }
  for (uint32_t i = spec.producers; i < n; ++i) {
    threads.emplace_back(ConsumerMain<Q>, q.get(), &slots[i], &ctl);
  }
  for (uint32_t i = 0; i < n; ++i) {
    MB_CHECK(pthread_getcpuclockid(threads[i].native_handle(), &slots[i].cpu_clock) == 0);
  }
  for (uint32_t r0 = ctl.ready.load(std::memory_order_acquire); r0 < n;
       r0 = ctl.ready.load(std::memory_order_acquire)) {
    ctl.ready.wait(r0, std::memory_order_acquire);
  }
  r.setup_ms = MsSince(t_setup);

  ctl.go.store(1, std::memory_order_release);
  ctl.go.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(spec.warmup_ms));
  const Snapshot s0 = Take(slots.get(), n);
  ctx_switches.Start();
  instructions.Start();
  cycles.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(spec.duration_ms));
  ctx_switches.Stop();
  instructions.Stop();
  cycles.Stop();
  const Snapshot s1 = Take(slots.get(), n);
  ctl.stop.store(1, std::memory_order_relaxed);
  for (std::thread& t : threads) t.join();

  r.window_ms = std::chrono::duration<double, std::milli>(s1.at - s0.at).count();
  for (uint32_t i = 0; i < n; ++i) {
    const bool producer = i < spec.producers;
    const uint64_t ok = s1.ok[i] - s0.ok[i];
    const uint64_t fail = s1.fail[i] - s0.fail[i];
    const uint64_t waits = s1.waits[i] - s0.waits[i];
    const uint64_t wait_ns = s1.wait_ns[i] - s0.wait_ns[i];
    const uint64_t cpu = s1.cpu_ns[i] - s0.cpu_ns[i];
    (producer ? r.offers_ok : r.polls_ok) += ok;
    (producer ? r.offer_failures : r.polls_empty) += fail;
    (producer ? r.offer_lock_waits : r.poll_lock_waits) += waits;
    (producer ? r.offer_lock_wait_ns : r.poll_lock_wait_ns) += wait_ns;
    (producer ? r.producer_cpu_ns : r.consumer_cpu_ns) += cpu;
  }
  if (ctx_switches.ok()) r.context_switches = ctx_switches.Read();
  if (instructions.ok() && cycles.ok()) {
    r.instructions = instructions.Read();
    r.cycles = cycles.Read();
  }

  // Every element offered was polled exactly once: by a consumer, or here.
  uint64_t offered = 0, offered_sum = 0, polled = 0, polled_sum = 0;
  for (uint32_t i = 0; i < n; ++i) {
    (i < spec.producers ? offered : polled) += slots[i].total_ok;
    (i < spec.producers ? offered_sum : polled_sum) += slots[i].checksum;
  }
  {
    typename Q::Consumer drain(q.get());
    Value v = 0;
    while (drain.Poll(&v)) {
      ++r.left_in_queue;
      polled_sum += v;
    }
  }
  polled += r.left_in_queue;
  if (offered != polled || offered_sum != polled_sum) {
    std::fprintf(stderr, "queue study: %s lost or duplicated elements: offered %llu, polled %llu\n",
                 std::string(Name(spec.queue)).c_str(), static_cast<unsigned long long>(offered),
                 static_cast<unsigned long long>(polled));
  }
  MB_CHECK(offered == polled && offered_sum == polled_sum);
  MB_CHECK(r.left_in_queue <= r.actual_capacity);

  const auto t_teardown = SteadyClock::now();
  q.reset();
  r.teardown_ms = MsSince(t_teardown);
  return r;
}

CellResult Run(const CellSpec& spec, const CounterSupport& support) {
  switch (spec.queue) {
    case QueueKind::kArrayOneLock:
      return RunCell<ArrayAdapter>(spec, support);
    case QueueKind::kLinkedTwoLock:
      return RunCell<LinkedAdapter>(spec, support);
    case QueueKind::kMoodycamel:
      return RunCell<MoodycamelAdapter>(spec, support);
    case QueueKind::kBoostLockfree:
      return RunCell<BoostAdapter>(spec, support);
    case QueueKind::kRing:
      return RunCell<RingAdapter>(spec, support);
  }
  return {};
}

// ------------------------------------------------------------------ output

// 1234567.8 -> "1,234,568"
std::string Grouped(double v) {
  std::string digits = fmt::format("{:.0f}", v);
  std::string out;
  const std::size_t start = digits[0] == '-' ? 1 : 0;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > start && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Percent(double share) { return fmt::format("{:.2f}%", 100.0 * share); }

// 2000000 -> "2M (10%)"
std::string CapacityLabel(uint64_t capacity) {
  std::string s = capacity % 1'000'000 == 0 ? fmt::format("{}M", capacity / 1'000'000)
                  : capacity % 1'000 == 0   ? fmt::format("{}K", capacity / 1'000)
                                            : fmt::format("{}", capacity);
  if (capacity * 100 % kStudyBaseCapacity == 0) {
    s += fmt::format(" ({}%)", capacity * 100 / kStudyBaseCapacity);
  }
  return s;
}

std::string Optional(const std::optional<uint64_t>& v, double per_ms) {
  if (!v) return "n/a";
  return Grouped(static_cast<double>(*v) / per_ms);
}

void PrintProgress(std::size_t index, std::size_t total, const CellResult& r) {
  fmt::print(
      "  [{:>2}/{}] {:<15} {} {:>3}:{:<3} cap {:>8}: {:>10} ops/ms {:>9} moved/ms, "
      "offer fail {:>6}, {:.2f} cores, setup+teardown {:.0f} ms\n",
      index, total, Name(r.spec.queue), Name(r.spec.mode), r.spec.producers, r.spec.consumers,
      r.actual_capacity, Grouped(r.ops_per_ms()), Grouped(r.moved_per_ms()),
      Percent(r.offer_failure_rate()), r.cores_busy(), r.setup_ms + r.teardown_ms);
  std::fflush(stdout);
}

void PrintMarkdown(const std::vector<CellResult>& rows) {
  fmt::print(
      "| capacity | producers | mode | queue | P:C | ops/ms | moved/ms | offer failures | "
      "producer share | consumer share | producer CPU | consumer CPU | lock waits offer / poll "
      "| lock wait ms offer / poll | ctx switches/ms | cores busy | IPC |\n");
  fmt::print(
      "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const CellResult& r : rows) {
    const bool locked =
        r.spec.queue == QueueKind::kArrayOneLock || r.spec.queue == QueueKind::kLinkedTwoLock;
    const auto ipc = r.ipc();
    fmt::print(
        "| {} | {} | {} | {} | {}:{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} | "
        "{} |\n",
        CapacityLabel(r.spec.capacity), r.spec.producers, Name(r.spec.mode), Name(r.spec.queue),
        r.spec.producers, r.spec.consumers, Grouped(r.ops_per_ms()), Grouped(r.moved_per_ms()),
        Percent(r.offer_failure_rate()), Percent(r.producer_share()), Percent(r.consumer_share()),
        Percent(r.producer_cpu_share()), Percent(r.consumer_cpu_share()),
        locked ? fmt::format("{} / {}", Grouped(static_cast<double>(r.offer_lock_waits)),
                             Grouped(static_cast<double>(r.poll_lock_waits)))
               : "-",
        locked ? fmt::format("{:.1f} / {:.1f}", static_cast<double>(r.offer_lock_wait_ns) / 1e6,
                             static_cast<double>(r.poll_lock_wait_ns) / 1e6)
               : "-",
        Optional(r.context_switches, r.window_ms), r.cores_busy(),
        ipc ? fmt::format("{:.2f}", *ipc) : "n/a");
  }
}

std::string OptionalNumber(const std::optional<uint64_t>& v) {
  return v ? fmt::format("{}", *v) : "";
}

void PrintCsv(const std::vector<CellResult>& rows) {
  fmt::print(
      "queue,mode,producers,consumers,capacity,actual_capacity,window_ms,ops_per_ms,"
      "moved_per_ms,offers,offer_failures,polls,polls_empty,producer_share,consumer_share,"
      "producer_cpu_share,consumer_cpu_share,offer_lock_waits,offer_lock_wait_ms,"
      "poll_lock_waits,poll_lock_wait_ms,context_switches,cores_busy,instructions,cycles,"
      "left_in_queue,setup_ms,teardown_ms\n");
  for (const CellResult& r : rows) {
    fmt::print(
        "{},{},{},{},{},{},{:.3f},{:.1f},{:.1f},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{},{:.3f},"
        "{},{:.3f},{},{:.3f},{},{},{},{:.1f},{:.1f}\n",
        Name(r.spec.queue), Name(r.spec.mode), r.spec.producers, r.spec.consumers, r.spec.capacity,
        r.actual_capacity, r.window_ms, r.ops_per_ms(), r.moved_per_ms(), r.offers(),
        r.offer_failures, r.polls(), r.polls_empty, r.producer_share(), r.consumer_share(),
        r.producer_cpu_share(), r.consumer_cpu_share(), r.offer_lock_waits,
        static_cast<double>(r.offer_lock_wait_ns) / 1e6, r.poll_lock_waits,
        static_cast<double>(r.poll_lock_wait_ns) / 1e6, OptionalNumber(r.context_switches),
        r.cores_busy(), OptionalNumber(r.instructions), OptionalNumber(r.cycles), r.left_in_queue,
        r.setup_ms, r.teardown_ms);
  }
}

std::string JsonOptional(const std::optional<uint64_t>& v) {
  return v ? fmt::format("{}", *v) : "null";
}

std::string Json(const std::vector<CellResult>& rows, uint64_t duration_ms, uint64_t warmup_ms,
                 const CounterSupport& support, const std::string& load_before,
                 const std::string& load_after) {
  std::string out = fmt::format(
      "{{\"benchmark\":\"queues\",\"duration_ms\":{},\"warmup_ms\":{},"
      "\"hardware_counters\":{},\"context_switches\":{},\"load_average_before\":{},"
      "\"load_average_after\":{},\"rows\":[",
      duration_ms, warmup_ms, JsonString(support.hardware_note), JsonString(support.context_note),
      JsonString(load_before), JsonString(load_after));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CellResult& r = rows[i];
    const auto ipc = r.ipc();
    out += fmt::format(
        "{}{{\"queue\":\"{}\",\"mode\":\"{}\",\"producers\":{},\"consumers\":{},\"capacity\":{},"
        "\"actual_capacity\":{},\"window_ms\":{:.3f},\"ops_per_ms\":{:.1f},"
        "\"moved_per_ms\":{:.1f},\"offers\":{},\"offer_failures\":{},\"polls\":{},"
        "\"polls_empty\":{},\"producer_share\":{:.4f},\"consumer_share\":{:.4f},"
        "\"producer_cpu_share\":{:.4f},\"consumer_cpu_share\":{:.4f},\"offer_lock_waits\":{},"
        "\"offer_lock_wait_ms\":{:.3f},\"poll_lock_waits\":{},\"poll_lock_wait_ms\":{:.3f},"
        "\"context_switches\":{},\"cores_busy\":{:.3f},\"instructions\":{},\"cycles\":{},"
        "\"ipc\":{},\"left_in_queue\":{},\"setup_ms\":{:.1f},\"teardown_ms\":{:.1f}}}",
        i == 0 ? "" : ",", Name(r.spec.queue), Name(r.spec.mode), r.spec.producers,
        r.spec.consumers, r.spec.capacity, r.actual_capacity, r.window_ms, r.ops_per_ms(),
        r.moved_per_ms(), r.offers(), r.offer_failures, r.polls(), r.polls_empty,
        r.producer_share(), r.consumer_share(), r.producer_cpu_share(), r.consumer_cpu_share(),
        r.offer_lock_waits, static_cast<double>(r.offer_lock_wait_ns) / 1e6, r.poll_lock_waits,
        static_cast<double>(r.poll_lock_wait_ns) / 1e6, JsonOptional(r.context_switches),
        r.cores_busy(), JsonOptional(r.instructions), JsonOptional(r.cycles),
        ipc ? fmt::format("{:.3f}", *ipc) : "null", r.left_in_queue, r.setup_ms, r.teardown_ms);
  }
  return out + "]}";
}

// A horizontal bar chart, log scale: one group of bars (one per queue) per
// producers / capacity / mode, two panels: ops/ms and moved/ms.
std::string Svg(const std::vector<CellResult>& rows, uint64_t duration_ms) {
  constexpr double kLeft = 200, kPanel = 370, kGap = 80, kTop = 78, kBar = 11, kBarGap = 2,
                   kGroupGap = 12;
  const double width = kLeft + 2 * kPanel + kGap + 60;
  // Groups in the order the cells ran.
  std::vector<std::vector<const CellResult*>> groups;
  for (const CellResult& r : rows) {
    if (groups.empty() || groups.back().front()->spec.producers != r.spec.producers ||
        groups.back().front()->spec.capacity != r.spec.capacity ||
        groups.back().front()->spec.mode != r.spec.mode) {
      groups.emplace_back();
    }
    groups.back().push_back(&r);
  }
  double lo = 1e300, hi = 1;
  for (const CellResult& r : rows) {
    for (double v : {r.ops_per_ms(), r.moved_per_ms()}) {
      if (v > 0) lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  const double d0 = std::floor(std::log10(std::min(lo, hi)));
  const double d1 = std::max(d0 + 1, std::ceil(std::log10(hi)));
  auto x_of = [&](double v) {
    if (v <= 0) return 0.0;
    return std::max(0.0, (std::log10(v) - d0) / (d1 - d0) * kPanel);
  };
  double height = kTop;
  for (const auto& g : groups)
    height += static_cast<double>(g.size()) * (kBar + kBarGap) + kGroupGap;
  height += 30;

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"10\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">matchbook-bench queues: "
      "throughput per cell ({} ms window, log scale)</text>\n",
      width, height, duration_ms);
  // Legend.
  double lx = 10;
  for (QueueKind q : kAllQueues) {
    s += fmt::format(
        "<rect x=\"{:.0f}\" y=\"28\" width=\"12\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{:.0f}\" y=\"37\">{}</text>\n",
        lx, Colour(q), lx + 16, Name(q));
    lx += 130;
  }
  const double panel_x[2] = {kLeft, kLeft + kPanel + kGap};
  const char* panel_title[2] = {"ops/ms: offer + poll calls, failed and empty included (study)",
                                "moved/ms: elements through the queue"};
  const double bottom = height - 30;
  for (int p = 0; p < 2; ++p) {
    s += fmt::format("<text x=\"{:.0f}\" y=\"58\" font-weight=\"bold\">{}</text>\n", panel_x[p],
                     panel_title[p]);
    for (double d = d0; d <= d1; d += 1) {
      const double x = panel_x[p] + (d - d0) / (d1 - d0) * kPanel;
      const double v = std::pow(10.0, d);
      const std::string label = v >= 1e6   ? fmt::format("{:.0f}M", v / 1e6)
                                : v >= 1e3 ? fmt::format("{:.0f}k", v / 1e3)
                                           : fmt::format("{:.0f}", v);
      s += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" stroke=\"#ccc\"/>"
          "<text x=\"{0:.1f}\" y=\"{3:.0f}\" text-anchor=\"middle\" fill=\"#555\">{4}</text>\n",
          x, kTop - 8, bottom, bottom + 12, label);
    }
  }
  double y = kTop;
  for (const auto& g : groups) {
    const CellResult& f = *g.front();
    const double gh = static_cast<double>(g.size()) * (kBar + kBarGap);
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{} {}:{} cap {}</text>\n",
                     kLeft - 8, y + gh / 2 + 3, f.spec.mode == Mode::kMpsc ? "MPSC" : "MPMC",
                     f.spec.producers, f.spec.consumers, CapacityLabel(f.spec.capacity));
    for (const CellResult* r : g) {
      const double vals[2] = {r->ops_per_ms(), r->moved_per_ms()};
      for (int p = 0; p < 2; ++p) {
        const double w = x_of(vals[p]);
        s += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"{}\">"
            "<title>{} {} {}:{} cap {}: {} /ms</title></rect>"
            "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"8\" fill=\"#333\">{}</text>\n",
            panel_x[p], y, w, kBar, Colour(r->spec.queue), Name(r->spec.queue), Name(r->spec.mode),
            r->spec.producers, r->spec.consumers, r->spec.capacity, Grouped(vals[p]),
            panel_x[p] + w + 3, y + kBar - 2, Grouped(vals[p]));
      }
      y += kBar + kBarGap;
    }
    y += kGroupGap;
  }
  return s + "</svg>\n";
}

// ------------------------------------------------------------------ CLI

struct StudyArgs {
  uint64_t duration_ms = 200;
  uint64_t warmup_ms = 50;
  std::vector<uint64_t> producers = {2, 50, 100};
  std::vector<uint64_t> capacities = {kStudyBaseCapacity / 10, kStudyBaseCapacity};
  std::vector<Mode> modes = {Mode::kMpsc, Mode::kMpmc};
  std::vector<QueueKind> queues = {std::begin(kAllQueues), std::end(kAllQueues)};
  uint64_t mpmc_consumers = 0;  // 0: as many as producers
  bool json = false;
  std::string svg;
};

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "unknown";
  return one + " " + five + " " + fifteen;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

int RunStudy(const StudyArgs& a) {
  std::vector<CellSpec> cells;
  for (uint64_t producers : a.producers) {
    for (uint64_t capacity : a.capacities) {
      for (Mode mode : a.modes) {
        for (QueueKind q : a.queues) {
          if (q == QueueKind::kRing && mode == Mode::kMpmc) continue;  // MPSC by design
          CellSpec c;
          c.queue = q;
          c.mode = mode;
          c.producers = static_cast<uint32_t>(producers);
          c.consumers = mode == Mode::kMpsc ? 1
                        : a.mpmc_consumers  ? static_cast<uint32_t>(a.mpmc_consumers)
                                            : static_cast<uint32_t>(producers);
          c.capacity = capacity;
          c.warmup_ms = a.warmup_ms;
          c.duration_ms = a.duration_ms;
          cells.push_back(c);
        }
      }
    }
  }

  const CounterSupport support = ProbeCounters();
  fmt::print("matchbook-bench queues: the queue study (doc 004) in C++\n");
  const std::string load_before = LoadAverage();
  fmt::print("  machine: {} online CPUs, {}; load average {}\n",
             std::thread::hardware_concurrency(), CpuModel(), load_before);
  fmt::print(
      "  {} cells; per cell: setup, {} ms warm-up, {} ms timed window, drain and check; "
      "element: uint64_t\n",
      cells.size(), a.warmup_ms, a.duration_ms);
  fmt::print(
      "  MPSC: 1 consumer; MPMC: {}; mpsc_ring is MPSC only (one consumer by design), so it "
      "has no MPMC rows\n",
      a.mpmc_consumers ? fmt::format("{} consumers", a.mpmc_consumers)
                       : std::string("as many consumers as producers (the study's N:N)"));
  fmt::print("  hardware counters: {}\n", support.hardware_note);
  fmt::print("  context switches: {}\n", support.context_note);
  fmt::print(
      "  ops/ms counts every offer and poll call, failed and empty ones included (JMH's "
      "throughput, as in the study); moved/ms counts elements through the queue\n\n");
  std::fflush(stdout);

  std::vector<CellResult> rows;
  rows.reserve(cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) {
    rows.push_back(Run(cells[i], support));
    PrintProgress(i + 1, cells.size(), rows.back());
  }

  const std::string load_after = LoadAverage();
  fmt::print("\n  load average after the cells: {}\n\n", load_after);
  PrintMarkdown(rows);
  fmt::print("\n");
  PrintCsv(rows);
  if (!a.svg.empty()) {
    std::ofstream out(a.svg);
    out << Svg(rows, a.duration_ms);
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", a.svg.c_str());
      return 1;
    }
    fmt::print("\nwrote {}\n", a.svg);
  }
  if (a.json) {
    fmt::print("{}\n", Json(rows, a.duration_ms, a.warmup_ms, support, load_before, load_after));
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

std::function<int()> AddQueueStudy(CLI::App* app) {
  auto a = std::make_shared<StudyArgs>();
  CLI::App* sub = app->add_subcommand(
      "queues",
      "The queue study (background document 004, in C++; docs/queues.md): every queue in "
      "every mode with every producer count and capacity; non-blocking offer/poll loops on "
      "all threads; counts read over a --duration-ms window after --warmup-ms. Prints a "
      "progress line per cell, the table as markdown and as CSV, and with --json one JSON "
      "object as the last line; --svg FILE writes a bar chart.");
  sub->footer(
      "Queues: array_one_lock (ArrayBlockingQueue analogue; also array, abq), linked_two_lock\n"
      "(LinkedBlockingQueue analogue; also linked, lbq), moodycamel (ConcurrentQueue, bounded\n"
      "by try_enqueue), boost_lockfree (boost::lockfree::queue, bounded_push; also boost),\n"
      "mpsc_ring (Matchbook's inbound ring: MPSC only, no MPMC rows; also ring).\n"
      "MPSC has 1 consumer; MPMC has as many consumers as producers (the study's N:N) unless\n"
      "--mpmc-consumers N.");
  AddCount(sub, "--duration-ms", &a->duration_ms, 1, UINT64_MAX,
           "timed window of each cell (default 200)");
  AddCount(sub, "--warmup-ms", &a->warmup_ms, 0, UINT64_MAX,
           "warm-up before each window (default 50)");
  AddCountList(sub, "--producers", &a->producers, 1, 1000, "producer counts (default 2,50,100)");
  AddCountList(sub, "--capacities", &a->capacities, 2, uint64_t{1} << 30,
               "queue capacities (default 2000000,20000000: 10% and 100% of the study's "
               "20,000,000)");
  auto modes = std::make_shared<std::vector<std::string>>();
  AddWordList(sub, "--modes", modes.get(), {"mpsc", "mpmc"}, "modes (default mpsc,mpmc)");
  auto queues = std::make_shared<std::vector<std::string>>();
  std::vector<std::string> names;
  for (QueueKind q : kAllQueues) names.emplace_back(Name(q));
  for (const char* alias : {"array", "abq", "linked", "lbq", "boost", "ring"}) {
    names.emplace_back(alias);
  }
  AddWordList(sub, "--queues", queues.get(), names, "queues (default: all)");
  auto consumers = std::make_shared<std::string>();
  sub->add_option("--mpmc-consumers", *consumers,
                  "MPMC consumers: same (as many as producers, the default) or N in [1, 1000]")
      ->transform(
          (CLI::IsMember({"same"}) | (DecimalCount() & CLI::Range(1, 1000))).description(""))
      ->type_name("same|N");
  sub->add_flag("--json", a->json, "print one JSON object as the last line");
  sub->add_option("--svg", a->svg, "write a bar chart to FILE")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("empty file name") : ""; }, "",
          "non-empty"))
      ->type_name("FILE");
  return [a, modes, queues, consumers]() -> int {
    if (!modes->empty()) {
      a->modes.clear();
      for (const std::string& m : *modes)
        a->modes.push_back(m == "mpsc" ? Mode::kMpsc : Mode::kMpmc);
    }
    if (!queues->empty()) {
      a->queues.clear();
      for (const std::string& q : *queues) a->queues.push_back(*ParseQueue(q));
    }
    if (!consumers->empty() && *consumers != "same") {
      MB_CHECK(CLI::detail::lexical_cast(*consumers, a->mpmc_consumers));
    }
    return RunStudy(*a);
  };
}

}  // namespace mb::bench
