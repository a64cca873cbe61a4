#include "load/prometheus.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <system_error>

namespace mb::load {
namespace {

bool NameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool NameChar(char c) { return NameStart(c) || (c >= '0' && c <= '9'); }
bool Blank(char c) { return c == ' ' || c == '\t'; }

// A cursor over one line.
struct Cursor {
  std::string_view s;
  std::size_t i = 0;
  bool End() const { return i >= s.size(); }
  char Peek() const { return End() ? '\0' : s[i]; }
  void SkipBlanks() {
    while (!End() && Blank(s[i])) ++i;
  }
  // [a-zA-Z_:][a-zA-Z0-9_:]*; metric and label names alike (a label name may
  // not hold ':', which only a stricter reader needs to refuse).
  std::string_view Name() {
    const std::size_t start = i;
    if (End() || !NameStart(s[i])) return {};
    while (!End() && NameChar(s[i])) ++i;
    return s.substr(start, i - start);
  }
  std::string_view Token() {
    const std::size_t start = i;
    while (!End() && !Blank(s[i])) ++i;
    return s.substr(start, i - start);
  }
};

// Go's strconv.ParseFloat spellings the exposition uses: decimals, exponents,
// an optional sign, Inf/+Inf/-Inf and NaN in any case.
std::optional<double> ParseValue(std::string_view t) {
  bool negative = false;
  if (!t.empty() && (t.front() == '+' || t.front() == '-')) {
    negative = t.front() == '-';
    t.remove_prefix(1);
  }
  if (t.empty() || t.front() == '+' || t.front() == '-') return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || end != t.data() + t.size()) return std::nullopt;
  return negative ? -v : v;
}

}  // namespace

const std::string* PromSample::Label(std::string_view key) const {
  for (const auto& [k, v] : labels)
    if (k == key) return &v;
  return nullptr;
}

Result<PromSample> ParsePromSample(std::string_view line) {
  Cursor c{line};
  c.SkipBlanks();
  PromSample out;
  const std::string_view name = c.Name();
  if (name.empty()) return InvalidArgument("no metric name");
  out.name = std::string(name);
  if (c.Peek() == '{') {
    ++c.i;
    while (true) {
      c.SkipBlanks();
      if (c.Peek() == '}') {
        ++c.i;
        break;
      }
      const std::string_view key = c.Name();
      if (key.empty()) return InvalidArgument("bad label name in " + out.name);
      c.SkipBlanks();
      if (c.Peek() != '=') return InvalidArgument("no '=' after label " + std::string(key));
      ++c.i;
      c.SkipBlanks();
      if (c.Peek() != '"') return InvalidArgument("label " + std::string(key) + " is not quoted");
      ++c.i;
      std::string value;
      bool closed = false;
      while (!c.End()) {
        const char ch = c.s[c.i++];
        if (ch == '"') {
          closed = true;
          break;
        }
        if (ch != '\\') {
          value += ch;
          continue;
        }
        if (c.End()) break;
        const char esc = c.s[c.i++];
        // \\, \" and \n are the format's escapes; any other is kept as written.
        if (esc == 'n') {
          value += '\n';
        } else if (esc == '\\' || esc == '"') {
          value += esc;
        } else {
          value += '\\';
          value += esc;
        }
      }
      if (!closed) return InvalidArgument("unterminated value of label " + std::string(key));
      out.labels.emplace_back(std::string(key), std::move(value));
      c.SkipBlanks();
      if (c.Peek() == ',') {
        ++c.i;
      } else if (c.Peek() != '}') {
        return InvalidArgument("expected ',' or '}' after label " + std::string(key));
      }
    }
  }
  if (!Blank(c.Peek())) return InvalidArgument("no value after " + out.name);
  c.SkipBlanks();
  const std::string_view value = c.Token();
  const auto v = ParseValue(value);
  if (!v) return InvalidArgument("bad value '" + std::string(value) + "' of " + out.name);
  out.value = *v;
  c.SkipBlanks();
  if (!c.End()) {  // an optional timestamp: integer milliseconds
    const std::string_view ts = c.Token();
    int64_t ms = 0;
    const auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), ms);
    if (ec != std::errc{} || end != ts.data() + ts.size())
      return InvalidArgument("bad timestamp '" + std::string(ts) + "' of " + out.name);
    c.SkipBlanks();
    if (!c.End()) return InvalidArgument("trailing text after " + out.name);
  }
  return out;
}

PromText ParsePromText(std::string_view text) {
  PromText out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = 0;
    while (first < line.size() && Blank(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;
    auto sample = ParsePromSample(line);
    if (sample.ok()) {
      out.samples.push_back(std::move(*sample));
    } else {
      ++out.bad_lines;
    }
  }
  return out;
}

Result<ServerCpu> ServerCpuFrom(const PromText& text) {
  ServerCpu cpu;
  bool found = false;
  for (const PromSample& s : text.samples) {
    if (s.name == "process_cpu_seconds_total" && s.labels.empty() && std::isfinite(s.value)) {
      cpu.process_seconds = s.value;
      found = true;
    } else if (s.name == "matchbook_thread_cpu_seconds_total" && std::isfinite(s.value)) {
      if (const std::string* t = s.Label("thread")) cpu.threads[*t] += s.value;
    }
  }
  if (!found) return NotFound("no process_cpu_seconds_total in the exposition");
  return cpu;
}

}  // namespace mb::load
