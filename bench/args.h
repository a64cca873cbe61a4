// Flags of the benchmark subcommands: "--name value" or "--name=value",
// read one at a time.
//
//   ArgReader args(argc, argv, 2);   // after "matchbook-bench <subcommand>"
//   std::string_view value;
//   while (args.Next()) {
//     if (args.flag() == "--json") ...
//     else if (args.flag() == "--seed" && args.Value(&value) && Parse(value)) ...
//     else fail("bad argument", args.raw());
//   }
//
// Thread safety: a plain value over argv.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

namespace mb::bench {

class ArgReader {
 public:
  ArgReader(int argc, char** argv, int first) : argc_(argc), argv_(argv), i_(first - 1) {}

  // Moves to the next argument; false after the last.
  bool Next() {
    if (++i_ >= argc_) return false;
    flag_ = argv_[i_];
    inline_value_ = false;
    if (auto eq = flag_.find('='); eq != std::string_view::npos) {
      value_ = flag_.substr(eq + 1);
      flag_ = flag_.substr(0, eq);
      inline_value_ = true;
    }
    return true;
  }

  // The argument's name ("--seed" for "--seed=7" too).
  std::string_view flag() const { return flag_; }
  // The whole argument, for messages.
  const char* raw() const { return argv_[i_]; }

  // The flag's value: after '=', else the next argument (consumed). False
  // when there is none.
  bool Value(std::string_view* out) {
    if (!inline_value_) {
      if (i_ + 1 >= argc_) return false;
      value_ = argv_[++i_];
      inline_value_ = true;
    }
    *out = value_;
    return true;
  }

 private:
  int argc_;
  char** argv_;
  int i_;
  std::string_view flag_;
  std::string_view value_;
  bool inline_value_ = false;
};

// A decimal count; `separators` may group the digits ("1_000_000"). False
// when empty, when another character appears, or on overflow.
inline bool ParseU64(std::string_view s, uint64_t* out, std::string_view separators = "_") {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char ch : s) {
    if (separators.find(ch) != std::string_view::npos) continue;
    if (ch < '0' || ch > '9') return false;
    const auto digit = static_cast<uint64_t>(ch - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

}  // namespace mb::bench
