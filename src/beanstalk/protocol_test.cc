#include "beanstalk/protocol.h"

#include <gtest/gtest.h>

namespace kvq::beanstalk {
namespace {

using namespace std::string_view_literals;

Command parsed(std::string_view text) {
  auto result = parse_command(text);
  EXPECT_TRUE(std::holds_alternative<Command>(result)) << text;
  return std::holds_alternative<Command>(result) ? std::get<Command>(result) : Command{};
}

LineError error_of(std::string_view text) {
  auto result = parse_command(text);
  EXPECT_TRUE(std::holds_alternative<LineError>(result)) << text;
  return std::holds_alternative<LineError>(result) ? std::get<LineError>(result)
                                                   : LineError::kUnknownCommand;
}

// Every request a decoder fed `bytes` hands out, errors as their reply words.
std::vector<std::string> decode_all(std::string_view bytes, size_t max_job_size = 100) {
  Decoder decoder(max_job_size);
  decoder.feed(bytes);
  std::vector<std::string> out;
  while (auto request = decoder.next()) {
    if (request->command) {
      out.push_back(std::string(verb_name(request->command->verb)) +
                    (request->command->verb == Verb::kPut ? "[" + request->body + "]" : ""));
    } else {
      out.emplace_back(request->error);
    }
  }
  return out;
}

TEST(ProtocolTest, PutReadsItsFourNumbers) {
  Command c = parsed("put 4294967295 10 0 5");
  EXPECT_EQ(c.verb, Verb::kPut);
  EXPECT_EQ(c.priority, 4294967295u);
  EXPECT_EQ(c.delay, 10u);
  EXPECT_EQ(c.ttr, 0u);
  EXPECT_EQ(c.bytes, 5u);
}

TEST(ProtocolTest, NumbersAreDecimalDigitsWithinTheirRange) {
  EXPECT_EQ(error_of("put 4294967296 0 1 1"), LineError::kBadFormat);
  EXPECT_EQ(error_of("put -1 0 1 1"), LineError::kBadFormat);
  EXPECT_EQ(error_of("put +1 0 1 1"), LineError::kBadFormat);
  EXPECT_EQ(error_of("put 0x10 0 1 1"), LineError::kBadFormat);
  EXPECT_EQ(error_of("delete 18446744073709551616"), LineError::kBadFormat);
  EXPECT_EQ(parsed("delete 18446744073709551615").id, 18446744073709551615u);
  EXPECT_EQ(parsed("delete 0007").id, 7u);
}

TEST(ProtocolTest, WrongArgumentCountsAndSpacingAreBadFormat) {
  EXPECT_EQ(error_of("put 1 0 1"), LineError::kBadFormat);
  EXPECT_EQ(error_of("reserve extra"), LineError::kBadFormat);
  EXPECT_EQ(error_of("use  a"), LineError::kBadFormat);
  EXPECT_EQ(error_of("watch default extra"), LineError::kBadFormat);
  EXPECT_EQ(error_of("release 1 2"), LineError::kBadFormat);
  EXPECT_EQ(error_of("stats "), LineError::kBadFormat);
}

TEST(ProtocolTest, UnknownVerbsAreUnknownCommands) {
  EXPECT_EQ(error_of("frobnicate"), LineError::kUnknownCommand);
  EXPECT_EQ(error_of(""), LineError::kUnknownCommand);
  EXPECT_EQ(error_of("PUT 1 0 1 1"), LineError::kUnknownCommand);
}

TEST(ProtocolTest, EveryVerbParsesByItsName) {
  for (std::string_view text : {"use t",
                                "reserve",
                                "reserve-with-timeout 0",
                                "reserve-job 1",
                                "delete 1",
                                "release 1 2 3",
                                "bury 1 2",
                                "touch 1",
                                "watch t",
                                "ignore t",
                                "peek 1",
                                "peek-ready",
                                "peek-delayed",
                                "peek-buried",
                                "kick 5",
                                "kick-job 1",
                                "stats-job 1",
                                "stats-tube t",
                                "stats",
                                "list-tubes",
                                "list-tube-used",
                                "list-tubes-watched",
                                "pause-tube t 5",
                                "quit"}) {
    Command c = parsed(text);
    EXPECT_EQ(std::string(text).rfind(std::string(verb_name(c.verb)), 0), 0u) << text;
  }
  Command pause = parsed("pause-tube emails 30");
  EXPECT_EQ(pause.tube, "emails");
  EXPECT_EQ(pause.delay, 30u);
}

TEST(ProtocolTest, NamesFollowTheProtocolsRules) {
  EXPECT_TRUE(is_valid_name("a+b/c;d$e(f)_g.h-1"));
  EXPECT_TRUE(is_valid_name(std::string(kMaxNameBytes, 'a')));
  EXPECT_FALSE(is_valid_name(std::string(kMaxNameBytes + 1, 'a')));
  EXPECT_FALSE(is_valid_name("-abc"));
  EXPECT_FALSE(is_valid_name(""));
  EXPECT_FALSE(is_valid_name("a:b"));
  EXPECT_FALSE(is_valid_name("a\tb"));
  EXPECT_EQ(error_of("use -abc"), LineError::kBadFormat);
  EXPECT_EQ(error_of("watch " + std::string(201, 'a')), LineError::kBadFormat);
}

TEST(ProtocolTest, APutsBodyFollowsItsLineAndMayHoldAnyBytes) {
  std::vector<std::string> out = decode_all("put 0 0 1 5\r\na\0\r\nc\r\nquit\r\n"sv);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], "put[a\0\r\nc]"sv);
  EXPECT_EQ(out[1], "quit");
}

TEST(ProtocolTest, ABodyNotEndedByCrlfIsExpectedCrlfAndItsBytesAreConsumed) {
  // As beanstalkd: <bytes> + 2 bytes are taken, so "\nlist-tube-used" is the next line.
  EXPECT_EQ(decode_all("put 1 0 1 3\r\nabcd\r\nlist-tube-used\r\n"),
            (std::vector<std::string>{"EXPECTED_CRLF", "UNKNOWN_COMMAND"}));
}

TEST(ProtocolTest, ATooBigBodyIsDrainedWithoutBeingKept) {
  Decoder decoder(10);
  decoder.feed("put 0 0 1 1000\r\n");
  auto first = decoder.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->error, "JOB_TOO_BIG");
  for (int i = 0; i < 10; ++i) {
    decoder.feed(std::string(100, 'x'));
    EXPECT_FALSE(decoder.next().has_value());
    EXPECT_EQ(decoder.buffered(), 0u) << "a body being drained is kept";
  }
  decoder.feed("\r\nstats\r\n");
  auto second = decoder.next();
  ASSERT_TRUE(second.has_value() && second->command.has_value());
  EXPECT_EQ(second->command->verb, Verb::kStats);
  EXPECT_EQ(decode_all("put 0 0 1 11\r\n0123456789a\r\nput 0 0 1 10\r\n0123456789\r\n", 10),
            (std::vector<std::string>{"JOB_TOO_BIG", "put[0123456789]"}));
}

TEST(ProtocolTest, ALineOver224BytesIsBadFormatAndTheRestOfItIsSkipped) {
  const std::string longest = "use " + std::string(kMaxLineBytes - 6, 'a');  // 224 with CRLF
  EXPECT_EQ(decode_all(longest + "\r\n"), (std::vector<std::string>{"BAD_FORMAT"}))
      << "a 218-byte name is over 200, but the line itself is within the limit";
  EXPECT_EQ(decode_all(std::string(222, 'x') + "\r\n"),
            (std::vector<std::string>{"UNKNOWN_COMMAND"}));
  EXPECT_EQ(decode_all(std::string(223, 'x') + "\r\n"), (std::vector<std::string>{"BAD_FORMAT"}));
  EXPECT_EQ(decode_all(std::string(300, 'x') + "\r\nlist-tube-used\r\n"),
            (std::vector<std::string>{"BAD_FORMAT", "list-tube-used"}));
  // The overlong line's end may come in pieces, the CRLF split between two.
  Decoder decoder;
  decoder.feed(std::string(500, 'x') + "\r");
  auto bad = decoder.next();
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->error, "BAD_FORMAT");
  EXPECT_FALSE(decoder.next().has_value());
  EXPECT_LE(decoder.buffered(), 1u);
  decoder.feed("\nquit\r\n");
  auto quit = decoder.next();
  ASSERT_TRUE(quit.has_value() && quit->command.has_value());
  EXPECT_EQ(quit->command->verb, Verb::kQuit);
}

TEST(ProtocolTest, RequestsArriveByteByByte) {
  const std::string stream = "use t\r\nput 5 0 1 2\r\nhi\r\nreserve\r\n";
  Decoder decoder;
  std::vector<Verb> verbs;
  for (char c : stream) {
    decoder.feed(std::string_view(&c, 1));
    while (auto request = decoder.next()) verbs.push_back(request->command->verb);
  }
  EXPECT_EQ(verbs, (std::vector<Verb>{Verb::kUse, Verb::kPut, Verb::kReserve}));
}

TEST(ProtocolTest, RepliesAreSpelledAsTheProtocolGivesThem) {
  EXPECT_EQ(line("DELETED"), "DELETED\r\n");
  EXPECT_EQ(line("INSERTED", 12), "INSERTED 12\r\n");
  EXPECT_EQ(job_reply("RESERVED", 3, "ab"), "RESERVED 3 2\r\nab\r\n");
  EXPECT_EQ(ok_reply(yaml_list({"default", "x"})), "OK 18\r\n---\n- default\n- x\n\r\n");
  YamlMap map;
  map.add("id", 3).add("tube", "default").add_quoted("version", "kvq \"1\"");
  EXPECT_EQ(map.text(), "---\nid: 3\ntube: default\nversion: \"kvq \\\"1\\\"\"\n");
}

}  // namespace
}  // namespace kvq::beanstalk
