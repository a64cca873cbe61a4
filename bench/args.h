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

}  // namespace mb::bench
