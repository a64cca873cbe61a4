#include "load/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mb::load {
namespace {

TEST(PromSample, NameValueAndNoLabels) {
  auto s = ParsePromSample("process_cpu_seconds_total 12.5");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "process_cpu_seconds_total");
  EXPECT_TRUE(s->labels.empty());
  EXPECT_DOUBLE_EQ(s->value, 12.5);
}

TEST(PromSample, ExponentsSignsInfinitiesAndNaN) {
  struct Case {
    const char* text;
    double want;
  } cases[] = {{"m 1e-3", 0.001},
               {"m 1.5E+2", 150},
               {"m -2.5e1", -25},
               {"m +7", 7},
               {"m 0", 0},
               {"m +Inf", std::numeric_limits<double>::infinity()},
               {"m Inf", std::numeric_limits<double>::infinity()},
               {"m -Inf", -std::numeric_limits<double>::infinity()}};
  for (const Case& c : cases) {
    auto s = ParsePromSample(c.text);
    ASSERT_TRUE(s.ok()) << c.text << ": " << s.status().message();
    EXPECT_EQ(s->value, c.want) << c.text;
  }
  auto nan = ParsePromSample("m NaN");
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(nan->value));
}

TEST(PromSample, LabelsWithEscapesAndATrailingComma) {
  auto s = ParsePromSample(
      R"(matchbook_thread_cpu_seconds_total{thread="a \"quoted\" name",path="C:\\dir",)"
      R"(note="two\nlines",le="+Inf",} 3.25 1700000000000)");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->labels.size(), 4u);
  EXPECT_EQ(*s->Label("thread"), "a \"quoted\" name");
  EXPECT_EQ(*s->Label("path"), "C:\\dir");
  EXPECT_EQ(*s->Label("note"), "two\nlines");
  EXPECT_EQ(*s->Label("le"), "+Inf");
  EXPECT_EQ(s->Label("absent"), nullptr);
  EXPECT_DOUBLE_EQ(s->value, 3.25);
}

TEST(PromSample, ABraceOrCommaInsideAQuotedValueIsText) {
  auto s = ParsePromSample(R"(m{a="x}, y{",b="2"} 1)");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s->Label("a"), "x}, y{");
  EXPECT_EQ(*s->Label("b"), "2");
}

TEST(PromSample, RefusesMalformedLines) {
  for (const char* bad : {"", "1m 2", "m", "m{a=\"1\"}", "m{a=\"1\" 2", "m{a=1} 2", "m{a\"1\"} 2",
                          "m{=\"1\"} 2", "m x", "m 1 2 3", "m 1 ts", "m ++1", "m{a=\"1\"}2"}) {
    EXPECT_FALSE(ParsePromSample(bad).ok()) << "'" << bad << "'";
  }
}

TEST(PromText, SkipsCommentsBlankLinesAndBadLines) {
  const PromText t = ParsePromText(
      "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds\n"
      "# TYPE process_cpu_seconds_total counter\n"
      "process_cpu_seconds_total 4.2\r\n"
      "\n"
      "   # an indented comment\n"
      "this line is not a sample\n"
      "h_bucket{le=\"+Inf\"} 17\n"
      "h_sum 1.2e-1");  // no final newline
  ASSERT_EQ(t.samples.size(), 3u);
  EXPECT_EQ(t.bad_lines, 1u);
  EXPECT_EQ(t.samples[0].name, "process_cpu_seconds_total");
  EXPECT_DOUBLE_EQ(t.samples[0].value, 4.2);
  EXPECT_EQ(*t.samples[1].Label("le"), "+Inf");
  EXPECT_DOUBLE_EQ(t.samples[2].value, 0.12);
}

TEST(ServerCpu, ProcessTotalAndThreadsByName) {
  const PromText t = ParsePromText(
      "process_cpu_seconds_total 10.5\n"
      "process_cpu_seconds_total_other 99\n"
      "matchbook_thread_cpu_seconds_total{thread=\"engine\"} 3\n"
      "matchbook_thread_cpu_seconds_total{thread=\"mb-io\"} 1.5\n"
      "matchbook_thread_cpu_seconds_total{thread=\"mb-io\"} 2\n"
      "matchbook_thread_cpu_seconds_total{other=\"x\"} 7\n"
      "matchbook_thread_cpu_seconds_total{thread=\"bad\"} NaN\n");
  auto cpu = ServerCpuFrom(t);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_DOUBLE_EQ(cpu->process_seconds, 10.5);
  ASSERT_EQ(cpu->threads.size(), 2u);
  EXPECT_DOUBLE_EQ(cpu->threads.at("engine"), 3);
  EXPECT_DOUBLE_EQ(cpu->threads.at("mb-io"), 3.5);  // same name: summed
}

TEST(ServerCpu, NotFoundWithoutAFiniteProcessTotal) {
  EXPECT_EQ(ServerCpuFrom(ParsePromText("")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ServerCpuFrom(ParsePromText("process_cpu_seconds_total NaN\n")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ServerCpuFrom(ParsePromText("<html>403 Forbidden</html>\n")).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace mb::load
