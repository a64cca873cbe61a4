#include "load/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "common/json_escape.h"

namespace mb::load {
namespace {

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// A JSON number: integers without a fraction, others to three decimals
// (microseconds for the _ms fields).
std::string Num(double v) {
  if (!std::isfinite(v)) return "0";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  std::string t = fmt::format("{:.3f}", v);
  while (t.back() == '0') t.pop_back();
  if (t.back() == '.') t.pop_back();
  return t;
}

// Builds one JSON object, members in insertion order.
class JsonObject {
 public:
  JsonObject& Raw(std::string_view key, std::string_view json) {
    text_ += text_.empty() ? "{" : ",";
    text_ += JsonString(key);
    text_ += ':';
    text_ += json;
    return *this;
  }
  JsonObject& N(std::string_view key, double v) { return Raw(key, Num(v)); }
  JsonObject& S(std::string_view key, std::string_view v) { return Raw(key, JsonString(v)); }
  // null when unset or not finite.
  JsonObject& Opt(std::string_view key, const std::optional<double>& v) {
    return v && std::isfinite(*v) ? N(key, *v) : Raw(key, "null");
  }
  std::string Done() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  std::string text_;
};

std::string FiguresJson(const Figures& f) {
  return JsonObject()
      .N("count", static_cast<double>(f.count))
      .N("p50_ms", f.p50)
      .N("p90_ms", f.p90)
      .N("p95_ms", f.p95)
      .N("p99_ms", f.p99)
      .N("p999_ms", f.p999)
      .N("max_ms", f.max)
      .Done();
}

std::string Esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

// A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten.
double NiceCeil(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

}  // namespace

Figures Figures::From(const Histogram::Snapshot& s) {
  Figures f;
  f.count = s.count;
  f.p50 = Ms(s.Quantile(0.50));
  f.p90 = Ms(s.Quantile(0.90));
  f.p95 = Ms(s.Quantile(0.95));
  f.p99 = Ms(s.Quantile(0.99));
  f.p999 = Ms(s.Quantile(0.999));
  f.max = Ms(s.max_ns);
  return f;
}

std::string ToJson(const Report& r) {
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  JsonObject by_code;
  for (const auto& [k, v] : r.errors_by_code) by_code.N(k, d(v));
  std::string steps = "[";
  for (const Step& s : r.steps) {
    if (steps.size() > 1) steps += ',';
    steps += JsonObject()
                 .N("rate", s.rate)
                 .N("achieved", s.achieved)
                 .N("requests", d(s.requests))
                 .N("errors", d(s.errors))
                 .N("dropped", d(s.dropped))
                 .N("p50", s.order.p50)
                 .N("p99", s.order.p99)
                 .N("max", s.order.max)
                 .Raw("pass", s.pass ? "true" : "false")
                 .Opt("server_cpu_us_per_order", s.server_cpu_us_per_order)
                 .Done();
  }
  steps += ']';
  std::string series = "[";
  for (const SecondPoint& p : r.series) {
    if (series.size() > 1) series += ',';
    series += JsonObject()
                  .N("t", p.t_s)
                  .N("rate", p.rate)
                  .N("p50", p.p50_ms)
                  .N("p99", p.p99_ms)
                  .N("max", p.max_ms)
                  .Done();
  }
  series += ']';
  std::string threads = "null";
  if (r.server_cpu_seconds) {
    JsonObject t;
    for (const auto& [name, cpu] : r.server_threads)
      t.Raw(name, JsonObject()
                      .N("cpu_seconds", cpu.cpu_seconds)
                      .Opt("us_per_order", cpu.us_per_order)
                      .Done());
    threads = t.Done();
  }
  return JsonObject()
      .S("preset", r.preset)
      .S("symbol", r.symbol)
      .N("rate", r.rate)
      .N("duration_s", r.duration_s)
      .N("requests", d(r.requests))
      .N("responses", d(r.responses))
      .N("errors", d(r.errors))
      .Raw("errors_by_code", by_code.Done())
      .N("dropped", d(r.dropped))
      .N("achieved_rate_per_s", r.achieved_rate_per_s)
      .N("order_p50_ms", r.order.p50)
      .N("order_p90_ms", r.order.p90)
      .N("order_p95_ms", r.order.p95)
      .N("order_p99_ms", r.order.p99)
      .N("order_p999_ms", r.order.p999)
      .N("order_max_ms", r.order.max)
      .N("delivery_p50_ms", r.delivery.p50)
      .N("delivery_p99_ms", r.delivery.p99)
      .N("delivery_max_ms", r.delivery.max)
      .N("freshness_p50_ms", r.freshness.p50)
      .N("freshness_p99_ms", r.freshness.p99)
      .N("freshness_max_ms", r.freshness.max)
      .Raw("order", FiguresJson(r.order))
      .Raw("delivery", FiguresJson(r.delivery))
      .Raw("freshness", FiguresJson(r.freshness))
      .N("history_readers", r.history_readers)
      .Raw("history", FiguresJson(r.history))
      .N("history_errors", d(r.history_errors))
      .N("subscribers", r.subscribers)
      .N("subscriber_drops", d(r.subscriber_drops))
      .N("messages", d(r.messages))
      .N("messages_delivered", d(r.messages_delivered))
      .N("loadgen_cpu_percent", r.loadgen_cpu_percent)
      .Opt("server_cpu_seconds", r.server_cpu_seconds)
      .Opt("server_cpu_window_s", r.server_cpu_window_s)
      .Opt("server_cpu_us_per_order", r.server_cpu_us_per_order)
      .Opt("server_cpu_ns_per_message", r.server_cpu_ns_per_message)
      .Raw("server_threads", threads)
      .Raw("server_cpu_warning", r.server_cpu_warning ? JsonString(*r.server_cpu_warning) : "null")
      .N("threads", r.threads)
      .N("connections", r.connections)
      .N("accounts", r.accounts)
      .Raw("aborted", r.aborted ? JsonString(*r.aborted) : "null")
      .Raw("steps", steps)
      .Raw("series", series)
      .Done();
}

std::string HumanSummary(const Report& r) {
  std::string s;
  s += fmt::format("matchbook-load  preset {}  symbol {}  offered {:.0f}/s  {:.1f} s\n", r.preset,
                   r.symbol, r.rate, r.duration_s);
  if (r.aborted) s += fmt::format("ABORTED: {}\n", *r.aborted);
  s += fmt::format("requests {}  answered {}  errors {}  dropped {}  achieved {:.1f}/s\n",
                   r.requests, r.responses, r.errors, r.dropped, r.achieved_rate_per_s);
  for (const auto& [k, v] : r.errors_by_code) s += fmt::format("  error {:<40} {}\n", k, v);
  s += fmt::format("{:<22}{:>9}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n", "latency (ms)", "count",
                   "p50", "p90", "p95", "p99", "p99.9", "max");
  auto row = [&](const char* name, const Figures& f) {
    s += fmt::format("{:<22}{:>9}{:>10.3f}{:>10.3f}{:>10.3f}{:>10.3f}{:>10.3f}{:>10.3f}\n", name,
                     f.count, f.p50, f.p90, f.p95, f.p99, f.p999, f.max);
  };
  row("order response", r.order);
  row("trade delivery", r.delivery);
  row("depth freshness", r.freshness);
  if (r.history_readers > 0) row("history query", r.history);
  s += fmt::format("subscribers {}  dropped {}  messages {}\n", r.subscribers, r.subscriber_drops,
                   r.messages);
  if (r.history_readers > 0)
    s += fmt::format("history readers {}  errors {}\n", r.history_readers, r.history_errors);
  for (const Step& st : r.steps) {
    s += fmt::format(
        "  step {:>9.0f}/s  achieved {:>9.1f}/s  p50 {:>8.3f}  p99 {:>8.3f}  errors "
        "{}  dropped {}  {}",
        st.rate, st.achieved, st.order.p50, st.order.p99, st.errors, st.dropped,
        st.pass ? "pass" : "fail");
    if (st.server_cpu_us_per_order)
      s += fmt::format("  server CPU {:.1f} us/order", *st.server_cpu_us_per_order);
    s += '\n';
  }
  if (r.server_cpu_seconds && r.server_cpu_window_s) {
    const double window = *r.server_cpu_window_s;
    s += fmt::format(
        "server CPU (its process_cpu_seconds_total) {:.3f} s over {:.1f} s = {:.1f} % of a core",
        *r.server_cpu_seconds, window, window > 0 ? 100 * *r.server_cpu_seconds / window : 0.0);
    if (r.server_cpu_us_per_order)
      s += fmt::format("  {:.1f} us/order", *r.server_cpu_us_per_order);
    if (r.server_cpu_ns_per_message)
      s += fmt::format("  {:.0f} ns/message ({} delivered)", *r.server_cpu_ns_per_message,
                       r.messages_delivered);
    s += '\n';
    for (const auto& [name, cpu] : r.server_threads) {
      if (cpu.cpu_seconds <= 0) continue;
      s += fmt::format("  server thread {:<20} {:>9.3f} s", name, cpu.cpu_seconds);
      if (cpu.us_per_order) s += fmt::format("  {:>9.1f} us/order", *cpu.us_per_order);
      s += '\n';
    }
  } else {
    s += fmt::format("server CPU not measured: {}\n",
                     r.server_cpu_warning.value_or("no /metrics reading"));
  }
  s +=
      fmt::format("load generator CPU {:.1f} % (100 % = one core), {} io threads, {} connections\n",
                  r.loadgen_cpu_percent, r.threads, r.connections);
  return s;
}

std::string ToSvg(const Report& r) {
  constexpr int kW = 900, kH = 620;
  constexpr int kLeft = 70, kRight = 20, kPlotW = kW - kLeft - kRight;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"{}\" y=\"20\" font-size=\"15\">matchbook-load {} on {}: "
      "{:.0f} orders/s offered, {:.1f}/s achieved, {} errors, {} dropped{}</text>\n",
      kW, kH, kLeft, Esc(r.preset), Esc(r.symbol), r.rate, r.achieved_rate_per_s, r.errors,
      r.dropped, r.aborted ? " (aborted)" : "");

  // Panel 1: percentiles as bars, order response and delivery/freshness.
  {
    const int top = 50, h = 220;
    const std::pair<const char*, double> bars[] = {{"p50", r.order.p50},
                                                   {"p90", r.order.p90},
                                                   {"p99", r.order.p99},
                                                   {"p99.9", r.order.p999},
                                                   {"max", r.order.max}};
    double vmax = 0;
    for (const auto& b : bars) vmax = std::max(vmax, b.second);
    const double ymax = NiceCeil(vmax);
    s += fmt::format("<text x=\"{}\" y=\"{}\">order response latency percentiles (ms)</text>\n",
                     kLeft, top - 8);
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n"
        "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"black\"/>\n",
        kLeft, top, top + h, kLeft + kPlotW);
    for (int i = 0; i <= 4; ++i) {
      const double v = ymax * i / 4;
      const double y = top + h - h * i / 4.0;
      s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", kLeft - 5,
                       y + 4, v);
      s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
                       kLeft, y, kLeft + kPlotW, y);
    }
    const double slot = kPlotW / 5.0;
    int i = 0;
    for (const auto& [name, v] : bars) {
      const double bh = ymax > 0 ? h * v / ymax : 0;
      const double x = kLeft + slot * i + slot * 0.2;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#4a7ebb\"/>\n"
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.3f}</text>\n"
          "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
          x, top + h - bh, slot * 0.6, bh, x + slot * 0.3, top + h - bh - 4, v, x + slot * 0.3,
          top + h + 16, name);
      ++i;
    }
  }

  // Panel 2: p50 and p99 per second.
  {
    const int top = 340, h = 220;
    double vmax = 0, tmax = 1;
    for (const SecondPoint& p : r.series) {
      vmax = std::max(vmax, p.p99_ms);
      tmax = std::max(tmax, p.t_s);
    }
    const double ymax = NiceCeil(vmax);
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\">order response p50 (green) and p99 (red) per second "
        "(ms) over time (s)</text>\n",
        kLeft, top - 8);
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n"
        "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"black\"/>\n",
        kLeft, top, top + h, kLeft + kPlotW);
    for (int i = 0; i <= 4; ++i) {
      const double y = top + h - h * i / 4.0;
      s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", kLeft - 5,
                       y + 4, ymax * i / 4);
      s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
                       kLeft, y, kLeft + kPlotW, y);
      const double x = kLeft + kPlotW * i / 4.0;
      s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", x,
                       top + h + 16, tmax * i / 4);
    }
    auto line = [&](auto get, const char* colour) {
      std::string pts;
      for (const SecondPoint& p : r.series)
        pts += fmt::format("{:.1f},{:.1f} ", kLeft + kPlotW * p.t_s / tmax,
                           top + h - (ymax > 0 ? h * get(p) / ymax : 0));
      s += fmt::format(
          "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", colour,
          pts);
    };
    line([](const SecondPoint& p) { return p.p50_ms; }, "green");
    line([](const SecondPoint& p) { return p.p99_ms; }, "red");
  }
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\">trade delivery p99 {:.3f} ms, depth freshness p99 {:.3f} ms, {} "
      "subscribers ({} dropped), load generator CPU {:.0f} %</text>\n</svg>\n",
      kLeft, kH - 15, r.delivery.p99, r.freshness.p99, r.subscribers, r.subscriber_drops,
      r.loadgen_cpu_percent);
  return s;
}

Status WriteFiles(const Report& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("--out-dir {}: {}", dir, ec.message()));
  const auto base = std::filesystem::path(dir) / ("load-" + r.preset);
  for (const auto& [ext, text] :
       {std::pair{".json", ToJson(r) + "\n"}, std::pair{".svg", ToSvg(r)}}) {
    const std::string path = base.string() + ext;
    std::ofstream f(path, std::ios::trunc);
    f << text;
    if (!f.good()) return IoError("cannot write " + path);
  }
  return Status::Ok();
}

}  // namespace mb::load
