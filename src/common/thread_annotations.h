// Locking contracts the compiler checks: clang's thread-safety attributes
// behind MB_ macros, and the mutex types that carry them.
//
// A class states which mutex guards what on the members themselves:
//
//   mb::Mutex mu_;
//   std::deque<Job> jobs_ MB_GUARDED_BY(mu_);
//   bool stop_ MB_GUARDED_BY(mu_) = false;
//   void DrainLocked() MB_REQUIRES(mu_);  // callers hold mu_
//
// and clang's -Wthread-safety (the `tsa` preset) rejects a read or write of
// jobs_ without mu_ held, a call of DrainLocked() without it, a lock taken
// twice or never released. Under g++ the macros expand to nothing and the
// wrappers compile to the std types they hold.
//
// Why wrappers: libstdc++'s std::mutex, std::shared_mutex, std::lock_guard and
// std::unique_lock carry no capability attributes, so the analysis cannot see
// a lock taken through them. mb::Mutex and mb::MutexLock, mb::SharedMutex with
// mb::WriterLock and mb::ReaderLock are the same objects with the attributes
// on; a guarded member must be locked through them.
//
// Condition variables stay std::condition_variable: std::condition_variable_any
// would wrap one with a mutex of its own (held by a shared_ptr) and take both
// locks on every wait. MutexLock holds a std::unique_lock<std::mutex> and
// lends it to the waits:
//
//   mb::MutexLock lock(mu_);
//   cv_.wait(lock.native(), [this]() MB_REQUIRES(mu_) { return stop_ || !jobs_.empty(); });
//
// For the analysis the mutex stays held across the wait, which is what the
// code after it sees: a wait returns with the mutex held, and the predicate
// runs with it held. native() is for waits while the MutexLock holds its
// mutex; unlocking through it would hide the unlock from the analysis
// (MutexLock::Unlock()/Lock() are the checked way).
//
// A lambda is a function of its own to the analysis, checked without its
// caller's locks, so a wait predicate or a std::visit visitor that touches
// guarded members says MB_REQUIRES(mu_). That is taken on trust where the
// lambda is called from library code (libstdc++ calls it, and nothing is
// reported in system headers): keep such a call where the lock is visibly
// held.
//
// Limits: the analysis is intraprocedural and names a mutex by the expression
// that reaches it, so a member guarded by a mutex of another object (a
// connection's subscriptions under its hub's mutex) is reached through an
// accessor that REQUIRES the mutex passed to it; constructors and destructors
// are not checked.
//
// Thread safety: Mutex and SharedMutex from any thread (they are the locks);
// a MutexLock, WriterLock or ReaderLock belongs to the thread that made it.
#pragma once

#include <mutex>
#include <shared_mutex>

#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(capability)
#define MB_THREAD_ANNOTATION(x) __attribute__((x))
#endif
#endif
#ifndef MB_THREAD_ANNOTATION
#define MB_THREAD_ANNOTATION(x)  // g++: no thread-safety analysis
#endif

// A type that is a lock ("mutex" in the diagnostics).
#define MB_CAPABILITY(name) MB_THREAD_ANNOTATION(capability(name))
// An RAII type that holds a lock for its lifetime.
#define MB_SCOPED_CAPABILITY MB_THREAD_ANNOTATION(scoped_lockable)
// A member read or written only with the lock held (reads: shared is enough).
#define MB_GUARDED_BY(x) MB_THREAD_ANNOTATION(guarded_by(x))
// A pointer member whose pointee is read or written only with the lock held.
#define MB_PT_GUARDED_BY(x) MB_THREAD_ANNOTATION(pt_guarded_by(x))
// Lock order: this lock is taken before / after the named ones.
#define MB_ACQUIRED_BEFORE(...) MB_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define MB_ACQUIRED_AFTER(...) MB_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
// The caller holds the lock(s) exclusively / at least shared.
#define MB_REQUIRES(...) MB_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define MB_REQUIRES_SHARED(...) MB_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// The function takes / gives back the lock(s) (no argument: *this).
#define MB_ACQUIRE(...) MB_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define MB_ACQUIRE_SHARED(...) MB_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define MB_RELEASE(...) MB_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define MB_RELEASE_SHARED(...) MB_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define MB_RELEASE_GENERIC(...) MB_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
// Takes the lock when it returns `result` (the first argument).
#define MB_TRY_ACQUIRE(...) MB_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define MB_TRY_ACQUIRE_SHARED(...) MB_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
// The caller must not hold the lock(s): the function takes them itself.
#define MB_EXCLUDES(...) MB_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// Tells the analysis the lock is held from here on (a run-time check, if any, is the function's).
#define MB_ASSERT_CAPABILITY(x) MB_THREAD_ANNOTATION(assert_capability(x))
#define MB_ASSERT_SHARED_CAPABILITY(x) MB_THREAD_ANNOTATION(assert_shared_capability(x))
// The function returns a reference to the named lock.
#define MB_RETURN_CAPABILITY(x) MB_THREAD_ANNOTATION(lock_returned(x))
// Turns the analysis off for one function: a locking pattern it cannot
// follow. Say why at each use.
#define MB_NO_THREAD_SAFETY_ANALYSIS MB_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace mb {

// std::mutex with the capability attributes. Also a BasicLockable/Lockable,
// so std::condition_variable_any and std::scoped_lock accept it (though only
// MutexLock's lock is visible to the analysis).
class MB_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() MB_ACQUIRE() { mu_.lock(); }
  void unlock() MB_RELEASE() { mu_.unlock(); }
  bool try_lock() MB_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::unique_lock underneath, so that
// std::condition_variable can wait on it: see native()).
class MB_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) MB_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() MB_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Lets go early (work that must not run under the lock) and takes it again.
  void Unlock() MB_RELEASE() { lock_.unlock(); }
  void Lock() MB_ACQUIRE() { lock_.lock(); }

  // For std::condition_variable::wait/wait_for/wait_until only (header comment).
  std::unique_lock<std::mutex>& native() noexcept { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

// std::shared_mutex with the capability attributes: one writer or many readers.
class MB_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() MB_ACQUIRE() { mu_.lock(); }
  void unlock() MB_RELEASE() { mu_.unlock(); }
  bool try_lock() MB_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void lock_shared() MB_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() MB_RELEASE_SHARED() { mu_.unlock_shared(); }
  bool try_lock_shared() MB_TRY_ACQUIRE_SHARED(true) { return mu_.try_lock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for its scope.
class MB_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) MB_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() MB_RELEASE() {
    if (held_) mu_.unlock();
  }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

  // Lets go early and takes it again.
  void Unlock() MB_RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void Lock() MB_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  SharedMutex& mu_;
  bool held_ = true;
};

// Holds a SharedMutex shared for its scope.
class MB_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) MB_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() MB_RELEASE() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace mb
