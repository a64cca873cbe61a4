#include "metrics/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <unordered_map>

#include "common/thread_annotations.h"

namespace mb::metrics {
namespace {

// Which thread records into which shard: assigned once per thread, round-robin.
std::atomic<uint32_t> g_next_shard{0};
constexpr uint32_t kNoShard = ~uint32_t{0};
thread_local uint32_t t_shard = kNoShard;

std::size_t ShardOfThisThread() noexcept {
  if (t_shard == kNoShard) {
    t_shard = g_next_shard.fetch_add(1, std::memory_order_relaxed) %
              static_cast<uint32_t>(Histogram::kShards);
  }
  return t_shard;
}

}  // namespace

static_assert(Histogram::kBuckets == 264);

void Histogram::Record(uint64_t ns) noexcept {
  Shard& shard = shards_[ShardOfThisThread()];
  shard.counts[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
  shard.sum_ns.fetch_add(ns, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Collect() const noexcept {
  Snapshot s;
  for (std::size_t i = 0; i < kShards; ++i) {
    const Shard& shard = shards_[i];
    for (std::size_t b = 0; b < kBuckets; ++b) {
      s.counts[b] += shard.counts[b].load(std::memory_order_relaxed);
    }
    s.sum_ns += shard.sum_ns.load(std::memory_order_relaxed);
  }
  for (std::size_t b = 0; b < kBuckets; ++b) {
    s.count += s.counts[b];
    if (s.counts[b] != 0) s.max_ns = UpperBound(b);
  }
  return s;
}

void Histogram::Reset() noexcept {
  for (std::size_t i = 0; i < kShards; ++i) {
    for (auto& c : shards_[i].counts) c.store(0, std::memory_order_relaxed);
    shards_[i].sum_ns.store(0, std::memory_order_relaxed);
  }
}

uint64_t Histogram::Snapshot::Quantile(double q) const noexcept {
  return Layout::Quantile(counts, count, q, max_ns);
}

void Histogram::Snapshot::Merge(const Snapshot& other) noexcept {
  for (std::size_t b = 0; b < kBuckets; ++b) counts[b] += other.counts[b];
  count += other.count;
  sum_ns += other.sum_ns;
  max_ns = std::max(max_ns, other.max_ns);
}

// ---- Registry ----

namespace {

enum class Type : uint8_t { kCounter, kGauge, kHistogram, kUntyped };

std::string_view TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
    case Type::kUntyped:
      break;
  }
  return "untyped";
}

[[noreturn]] void Die(std::string_view what) {
  std::fprintf(stderr, "mb::metrics: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void CheckMetricName(std::string_view name, Type type) {
  bool ok = !name.empty() && (IsNameStart(name[0]) || name[0] == ':');
  for (char c : name) ok = ok && (IsNameStart(c) || IsDigit(c) || c == ':');
  if (!ok) Die(fmt::format("invalid metric name \"{}\"", name));
  if (type == Type::kCounter && !name.ends_with("_total")) {
    Die(fmt::format("counter name \"{}\" does not end in _total", name));
  }
}

void CheckLabels(std::string_view metric, const Labels& labels, Type type) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string& l = labels[i].first;
    bool ok = !l.empty() && IsNameStart(l[0]) && !l.starts_with("__");
    for (char c : l) ok = ok && (IsNameStart(c) || IsDigit(c));
    if (!ok) Die(fmt::format("metric \"{}\": invalid label name \"{}\"", metric, l));
    if (type == Type::kHistogram && l == "le") {
      Die(fmt::format("histogram \"{}\": the label \"le\" is reserved", metric));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (labels[j].first == l) Die(fmt::format("metric \"{}\": label \"{}\" twice", metric, l));
    }
  }
}

void AppendEscaped(std::string* out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (quote && c == '"') {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

// `{a="x",b="y"` plus, when extra_name is set, `,le="..."`; then `}`. Nothing
// when there are no labels at all.
void AppendLabels(std::string* out, const Labels& labels, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  if (labels.empty() && extra_name.empty()) return;
  out->push_back('{');
  bool first = true;
  auto one = [&](std::string_view k, std::string_view v) {
    if (!first) out->push_back(',');
    first = false;
    out->append(k);
    out->append("=\"");
    AppendEscaped(out, v, true);
    out->push_back('"');
  };
  for (const auto& [k, v] : labels) one(k, v);
  if (!extra_name.empty()) one(extra_name, extra_value);
  out->push_back('}');
}

// Integral values as integers, others as the shortest decimal that reads back
// to the same double; infinities as the text format spells them.
void AppendValue(std::string* out, double v) {
  if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
  } else if (v == std::trunc(v) && std::fabs(v) < 9.007199254740992e15) {
    fmt::format_to(std::back_inserter(*out), "{}", static_cast<int64_t>(v));
  } else {
    fmt::format_to(std::back_inserter(*out), "{}", v);
  }
}

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

struct Series {
  Labels labels;
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Histogram> histogram;
  std::function<double()> read;
};

struct Family {
  std::string name;
  std::string help;
  Type type;

  // The series live under the registry's mutex (Registry::Impl::mu). The
  // analysis names a mutex only through the object that holds it, so they are
  // reached through series(registry_mu), which requires the mutex passed in
  // (for the analysis only) to be held.
  std::vector<std::shared_ptr<const Series>>& series([[maybe_unused]] const Mutex& registry_mu)
      MB_REQUIRES(registry_mu) {
    return series_;
  }

 private:
  std::vector<std::shared_ptr<const Series>> series_;
};

using Collector = std::function<void(SampleWriter&)>;

// One family's text while an exposition is built.
struct Block {
  std::string name;
  std::string help;
  Type type;
  bool has_help;
  std::string samples;
};

// Gathers the exposition, one block per family name in first-seen order.
class Exposition final : public SampleWriter {
 public:
  Block& Find(std::string_view name, std::string_view help, Type type, bool has_help) {
    auto it = index_.find(std::string(name));
    if (it != index_.end()) {
      Block& b = blocks_[it->second];
      if (b.type != type && type != Type::kUntyped) {
        if (b.type != Type::kUntyped) {
          Die(fmt::format("metric \"{}\" declared as {} and as {}", name, TypeName(b.type),
                          TypeName(type)));
        }
        b.type = type;
      }
      if (!b.has_help && has_help) {
        b.help = std::string(help);
        b.has_help = true;
      }
      return b;
    }
    index_.emplace(std::string(name), blocks_.size());
    blocks_.push_back(Block{std::string(name), std::string(help), type, has_help, {}});
    return blocks_.back();
  }

  void Family(std::string_view name, std::string_view help, std::string_view type) override {
    Type t = Type::kUntyped;
    if (type == "counter") {
      t = Type::kCounter;
    } else if (type == "gauge") {
      t = Type::kGauge;
    } else {
      Die(fmt::format("collector family \"{}\": type \"{}\" is not counter or gauge", name, type));
    }
    CheckMetricName(name, t);
    Find(name, help, t, true);
  }

  void Sample(std::string_view name, const Labels& labels, double value) override {
    auto it = index_.find(std::string(name));
    Block* b = nullptr;
    if (it != index_.end()) {
      b = &blocks_[it->second];
    } else {
      CheckMetricName(name, Type::kUntyped);
      b = &Find(name, {}, Type::kUntyped, false);
    }
    CheckLabels(name, labels, b->type);
    Line(b, name, labels, value);
  }

  static void Line(Block* b, std::string_view name, const Labels& labels, double value) {
    if (std::isnan(value)) return;
    b->samples.append(name);
    AppendLabels(&b->samples, labels);
    b->samples.push_back(' ');
    AppendValue(&b->samples, value);
    b->samples.push_back('\n');
  }

  std::string Text() const {
    std::size_t size = 0;
    for (const Block& b : blocks_)
      size += b.samples.size() + b.help.size() + 2 * b.name.size() + 32;
    std::string out;
    out.reserve(size);
    for (const Block& b : blocks_) {
      if (b.has_help) {
        out.append("# HELP ").append(b.name).push_back(' ');
        AppendEscaped(&out, b.help, false);
        out.push_back('\n');
      }
      out.append("# TYPE ").append(b.name).push_back(' ');
      out.append(TypeName(b.type)).push_back('\n');
      out.append(b.samples);
    }
    return out;
  }

 private:
  std::vector<Block> blocks_;
  std::unordered_map<std::string, std::size_t> index_;
};

void AppendHistogram(Block* b, const Series& s) {
  const Histogram::Snapshot snap = s.histogram->Collect();
  std::string* out = &b->samples;
  const std::string bucket = b->name + "_bucket";
  uint64_t cumulative = 0;
  std::size_t next = 0;  // the first bucket not yet added to cumulative
  for (uint64_t edge : Registry::ExposedBounds()) {
    // Every edge is some bucket's upper bound: the buckets up to it hold
    // exactly the values <= edge.
    while (next < Histogram::kBuckets && Histogram::UpperBound(next) <= edge) {
      cumulative += snap.counts[next++];
    }
    out->append(bucket);
    AppendLabels(out, s.labels, "le", fmt::format("{}", Seconds(edge)));
    fmt::format_to(std::back_inserter(*out), " {}\n", cumulative);
  }
  out->append(bucket);
  AppendLabels(out, s.labels, "le", "+Inf");
  fmt::format_to(std::back_inserter(*out), " {}\n", snap.count);
  out->append(b->name).append("_sum");
  AppendLabels(out, s.labels);
  fmt::format_to(std::back_inserter(*out), " {}\n", Seconds(snap.sum_ns));
  out->append(b->name).append("_count");
  AppendLabels(out, s.labels);
  fmt::format_to(std::back_inserter(*out), " {}\n", snap.count);
}

}  // namespace

struct Registry::Impl {
  // An entry of the exposition order: a registered family or a collector.
  struct Entry {
    std::shared_ptr<metrics::Family> family;
    std::shared_ptr<const Collector> collector;
  };

  mutable Mutex mu;
  std::vector<Entry> entries MB_GUARDED_BY(mu);
  std::unordered_map<std::string, std::shared_ptr<metrics::Family>> families MB_GUARDED_BY(mu);

  // Returns the family `name`, creating it (in registration order) if new.
  metrics::Family& FamilyOf(std::string_view name, std::string_view help, Type type)
      MB_REQUIRES(mu) {
    auto it = families.find(std::string(name));
    if (it != families.end()) {
      if (it->second->type != type) {
        Die(fmt::format("metric \"{}\" registered as {} and as {}", name,
                        TypeName(it->second->type), TypeName(type)));
      }
      return *it->second;
    }
    auto f = std::make_shared<metrics::Family>();
    f->name = std::string(name);
    f->help = std::string(help);
    f->type = type;
    families.emplace(f->name, f);
    entries.push_back(Entry{f, nullptr});
    return *f;
  }

  const Series* Existing(metrics::Family& f, const Labels& labels) MB_REQUIRES(mu) {
    for (const auto& s : f.series(mu)) {
      if (s->labels == labels) return s.get();
    }
    return nullptr;
  }

  void AddRead(std::string_view name, std::string_view help, Labels labels,
               std::function<double()> read, Type type) {
    CheckMetricName(name, type);
    CheckLabels(name, labels, type);
    if (!read) Die(fmt::format("metric \"{}\": empty read callback", name));
    MutexLock lock(mu);
    metrics::Family& f = FamilyOf(name, help, type);
    if (Existing(f, labels) != nullptr) {
      Die(fmt::format("metric \"{}\": series registered twice", name));
    }
    auto s = std::make_shared<Series>();
    s->labels = std::move(labels);
    s->read = std::move(read);
    f.series(mu).push_back(std::move(s));
  }
};

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;

Counter& Registry::AddCounter(std::string_view name, std::string_view help, Labels labels) {
  CheckMetricName(name, Type::kCounter);
  CheckLabels(name, labels, Type::kCounter);
  MutexLock lock(impl_->mu);
  metrics::Family& f = impl_->FamilyOf(name, help, Type::kCounter);
  if (const Series* s = impl_->Existing(f, labels)) {
    if (s->counter == nullptr) Die(fmt::format("counter \"{}\": series registered twice", name));
    return *s->counter;
  }
  auto s = std::make_shared<Series>();
  s->labels = std::move(labels);
  s->counter = std::make_unique<Counter>();
  Counter& c = *s->counter;
  f.series(impl_->mu).push_back(std::move(s));
  return c;
}

Histogram& Registry::AddHistogram(std::string_view name, std::string_view help, Labels labels) {
  CheckMetricName(name, Type::kHistogram);
  CheckLabels(name, labels, Type::kHistogram);
  MutexLock lock(impl_->mu);
  metrics::Family& f = impl_->FamilyOf(name, help, Type::kHistogram);
  if (const Series* s = impl_->Existing(f, labels)) return *s->histogram;
  auto s = std::make_shared<Series>();
  s->labels = std::move(labels);
  s->histogram = std::make_unique<Histogram>();
  Histogram& h = *s->histogram;
  f.series(impl_->mu).push_back(std::move(s));
  return h;
}

void Registry::AddGauge(std::string_view name, std::string_view help, Labels labels,
                        std::function<double()> read) {
  impl_->AddRead(name, help, std::move(labels), std::move(read), Type::kGauge);
}

void Registry::AddCounterFn(std::string_view name, std::string_view help, Labels labels,
                            std::function<double()> read) {
  impl_->AddRead(name, help, std::move(labels), std::move(read), Type::kCounter);
}

void Registry::AddCollector(std::function<void(SampleWriter&)> collect) {
  if (!collect) Die("empty collector");
  auto c = std::make_shared<const Collector>(std::move(collect));
  MutexLock lock(impl_->mu);
  impl_->entries.push_back(Impl::Entry{nullptr, std::move(c)});
}

std::string Registry::Expose() const {
  // The family list and each family's series are copied under the lock, then
  // read and written without it: callbacks never run under the registry lock.
  struct Item {
    std::shared_ptr<const metrics::Family> family;
    std::vector<std::shared_ptr<const Series>> series;
    std::shared_ptr<const Collector> collector;
  };
  std::vector<Item> items;
  {
    MutexLock lock(impl_->mu);
    items.reserve(impl_->entries.size());
    for (const auto& e : impl_->entries) {
      if (e.family) {
        items.push_back(Item{e.family, e.family->series(impl_->mu), nullptr});
      } else {
        items.push_back(Item{nullptr, {}, e.collector});
      }
    }
  }
  Exposition out;
  for (const Item& item : items) {
    if (item.collector) {
      (*item.collector)(out);
      continue;
    }
    const metrics::Family& f = *item.family;
    Block& b = out.Find(f.name, f.help, f.type, true);
    for (const auto& s : item.series) {
      if (s->histogram) {
        AppendHistogram(&b, *s);
      } else if (s->counter) {
        b.samples.append(f.name);
        AppendLabels(&b.samples, s->labels);
        fmt::format_to(std::back_inserter(b.samples), " {}\n", s->counter->value());
      } else {
        Exposition::Line(&b, f.name, s->labels, s->read());
      }
    }
  }
  return out.Text();
}

const std::vector<uint64_t>& Registry::ExposedBounds() {
  static const std::vector<uint64_t> bounds = [] {
    std::vector<uint64_t> v;
    for (int k = 6; k <= 33; ++k) {
      v.push_back(uint64_t{1} << k);
      v.push_back(uint64_t{3} << (k - 1));
    }
    v.push_back(uint64_t{1} << 34);
    return v;
  }();
  return bounds;
}

}  // namespace mb::metrics
