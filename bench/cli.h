// Command-line pieces shared by matchbook-bench's subcommands (CLI11).
//
// Every subcommand registers its options on a CLI::App subcommand and returns
// a runner bound to the parsed values; matchbook_bench.cc parses once and runs
// the chosen one. A bad argument is a CLI::ParseError whose message names the
// option and the value ("--commands: 'abc' is not a decimal count"); the
// program prints it and exits 2.
//
// Counts are decimal, as they always were here: digits, optionally grouped with
// '_' ("1_000_000"), and with ',' where a flag takes one count only and says so
// (the engine's). DecimalCount() turns them into plain digits before CLI11
// converts them: CLI11 2.1 reads integers with strtoull(base 0), which would
// take "-1" as 2^64-1, "0x10" as 16 and "010" as 8.
//
// Thread safety: plain functions, used before any benchmark thread starts.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mb::bench {

// Runs a parsed subcommand; returns the process's exit code.
using Runner = std::function<int()>;

// Transformer: a decimal count, digits grouped by any of `separators`, to plain
// digits without leading zeros. Fails on anything else (a sign, hex, spaces).
inline CLI::Validator DecimalCount(std::string separators = "_") {
  return CLI::Validator(
      [separators](std::string& s) -> std::string {
        std::string digits;
        for (char ch : s) {
          if (separators.find(ch) != std::string::npos) continue;
          if (ch < '0' || ch > '9') return "'" + s + "' is not a decimal count";
          digits += ch;
        }
        if (digits.empty()) return "'" + s + "' is not a decimal count";
        const std::size_t first = digits.find_first_not_of('0');
        s = first == std::string::npos ? "0" : digits.substr(first);
        return {};
      },
      "", "decimal count");
}

// Check (after DecimalCount): a power of two in [2, max].
inline CLI::Validator PowerOfTwo(uint64_t max) {
  return CLI::Validator(
      [max](std::string& s) -> std::string {
        uint64_t v = 0;
        if (!CLI::detail::lexical_cast(s, v) || v < 2 || (v & (v - 1)) != 0 || v > max) {
          return s + " is not a power of two in [2, " + std::to_string(max) + "]";
        }
        return {};
      },
      "", "power of two");
}

// "[min, max]", or ">= min" when there is no upper bound.
inline std::string RangeText(uint64_t min, uint64_t max) {
  if (max == UINT64_MAX) return ">= " + std::to_string(min);
  return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

// A count option: decimal, '_'-grouped (plus `separators`), within [min, max].
template <class T>
CLI::Option* AddCount(CLI::App* app, const std::string& name, T* out, uint64_t min, uint64_t max,
                      const std::string& description, const std::string& separators = "_") {
  return app->add_option(name, *out, description)
      ->transform(DecimalCount(separators))
      ->check(CLI::Range(min, max).description(RangeText(min, max)))
      ->type_name("N");
}

// A comma-separated list of counts, each within [min, max] ("2,50,100").
inline CLI::Option* AddCountList(CLI::App* app, const std::string& name, std::vector<uint64_t>* out,
                                 uint64_t min, uint64_t max, const std::string& description) {
  return app->add_option(name, *out, description)
      ->delimiter(',')
      ->allow_extra_args(false)
      ->transform(DecimalCount())
      ->check(CLI::Range(min, max).description("each " + RangeText(min, max)))
      ->type_name("N,N,...");
}

// A comma-separated list of words, each one of `words` ("mpsc,mpmc").
inline CLI::Option* AddWordList(CLI::App* app, const std::string& name,
                                std::vector<std::string>* out, std::vector<std::string> words,
                                const std::string& description) {
  return app->add_option(name, *out, description)
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(CLI::IsMember(std::move(words)))
      ->type_name("W,W,...");
}

}  // namespace mb::bench
