#include "app/serve_options.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/temp_dir.h"

namespace kvq::app {
namespace {

std::variant<ServeOptions, std::string> parse(std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("serve")};
  for (auto& a : args) argv.push_back(a.data());
  return parse_serve_options(static_cast<int>(argv.size()), argv.data());
}

TEST(ServeOptionsTest, DefaultsListenOnLoopbackWithDurableStorage) {
  auto o = std::get<ServeOptions>(parse({}));
  EXPECT_EQ(o.listen, "127.0.0.1:7411");
  EXPECT_EQ(o.data, "./kvq-data");
  EXPECT_EQ(o.durability, Durability::kSync);
}

TEST(ServeOptionsTest, EphemeralListensOnAFreeLoopbackPortRelaxedUnlessToldOtherwise) {
  auto parsed = parse({"--ephemeral"});
  ASSERT_TRUE(std::holds_alternative<ServeOptions>(parsed)) << std::get<std::string>(parsed);
  auto o = std::get<ServeOptions>(parsed);
  EXPECT_TRUE(o.ephemeral);
  EXPECT_EQ(o.listen, "127.0.0.1:0");
  EXPECT_EQ(o.durability, Durability::kNoSync);
  o = std::get<ServeOptions>(parse({"--ephemeral", "--durability", "durable"}));
  EXPECT_EQ(o.durability, Durability::kSync);
  // A place of its own, even the default one, is refused: the server would not be throwaway.
  for (std::vector<std::string> extra : {std::vector<std::string>{"--data", "./kvq-data"},
                                         {"--listen", "127.0.0.1:7411"},
                                         {"--store", "etcd://127.0.0.1:2379"}}) {
    extra.insert(extra.begin(), "--ephemeral");
    auto refused = parse(extra);
    ASSERT_TRUE(std::holds_alternative<std::string>(refused)) << extra[1];
    EXPECT_NE(std::get<std::string>(refused).find("--ephemeral"), std::string::npos);
  }
}

TEST(ServeOptionsTest, FlagsWinOverTheConfigFile) {
  testing::TempDir dir;
  std::ofstream(dir.sub("kvq.conf"))
      << "# a comment\nlisten = 127.0.0.1:9000\ndurability = nosync\n"
      << "data = /srv/kvq   # trailing comment\n";
  auto parsed = parse({"--config", dir.sub("kvq.conf"), "--listen=127.0.0.1:9100"});
  ASSERT_TRUE(std::holds_alternative<ServeOptions>(parsed)) << std::get<std::string>(parsed);
  auto o = std::get<ServeOptions>(parsed);
  EXPECT_EQ(o.listen, "127.0.0.1:9100");
  EXPECT_EQ(o.durability, Durability::kNoSync);
  EXPECT_EQ(o.data, "/srv/kvq");
}

TEST(ServeOptionsTest, WorkerThreadsMayBeZeroAndDefaultToTheStore) {
  EXPECT_FALSE(std::get<ServeOptions>(parse({})).worker_threads.has_value());
  EXPECT_EQ(std::get<ServeOptions>(parse({"--worker-threads", "0"})).worker_threads, 0u);
  EXPECT_EQ(std::get<ServeOptions>(parse({"--worker-threads", "12"})).worker_threads, 12u);
  EXPECT_NE(std::get<std::string>(parse({"--worker-threads", "257"})).find("worker-threads"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--io-threads", "0"})).find("io-threads"),
            std::string::npos);
}

TEST(ServeOptionsTest, EtcdAsyncTransactionsDefaultOnAndTurnOff) {
  EXPECT_TRUE(std::get<ServeOptions>(parse({})).etcd_async_transactions);
  EXPECT_FALSE(
      std::get<ServeOptions>(parse({"--etcd-async-transactions", "off"})).etcd_async_transactions);
  EXPECT_NE(std::get<std::string>(parse({"--etcd-async-transactions", "maybe"}))
                .find("etcd-async-transactions"),
            std::string::npos);
}

TEST(ServeOptionsTest, BadValuesAreNamed) {
  EXPECT_NE(std::get<std::string>(parse({"--durability", "sometimes"})).find("durability"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--max-body", "12"})).find("max-body"), std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--listen", "nowhere"})).find("HOST:PORT"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--frobnicate", "1"})).find("frobnicate"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--data"})).find("needs a value"), std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--config", "/nonexistent/kvq.conf"})).find("cannot read"),
            std::string::npos);
}

TEST(ServeOptionsTest, AListenPortMustBeADecimalNumberUpTo65535) {
  for (const char* bad : {"127.0.0.1:abc", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:0x10", ":7411"}) {
    auto parsed = parse({"--listen", bad});
    ASSERT_TRUE(std::holds_alternative<std::string>(parsed)) << bad << " was accepted";
    EXPECT_NE(std::get<std::string>(parsed).find("0..65535"), std::string::npos) << bad;
  }
  EXPECT_EQ(std::get<ServeOptions>(parse({"--listen", "0.0.0.0:0"})).listen, "0.0.0.0:0");
  EXPECT_EQ(std::get<ServeOptions>(parse({"--listen", "[::1]:65535"})).listen, "[::1]:65535");
}

TEST(ServeOptionsTest, TlsFilesGoTogether) {
  auto o = std::get<ServeOptions>(
      parse({"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem"}));
  EXPECT_EQ(o.tls_cert, "c.pem");
  EXPECT_EQ(o.tls_key, "k.pem");
  EXPECT_EQ(o.tls_client_ca, "ca.pem");
  EXPECT_NE(std::get<std::string>(parse({"--tls-cert", "c.pem"})).find("--tls-key"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--tls-key", "k.pem"})).find("--tls-cert"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--tls-client-ca", "ca.pem"})).find("--tls-cert"),
            std::string::npos);
}

TEST(ServeOptionsTest, BodyMemoryHasARange) {
  EXPECT_EQ(std::get<ServeOptions>(parse({})).max_body_memory, 64u << 20);
  EXPECT_EQ(std::get<ServeOptions>(parse({"--max-body-memory", "8388608"})).max_body_memory,
            8u << 20);
  EXPECT_NE(std::get<std::string>(parse({"--max-body-memory", "10"})).find("max-body-memory"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--max-body-memory", "99999999999999999999999"}))
                .find("max-body-memory"),
            std::string::npos);
}

TEST(ServeOptionsTest, AnEtcdStoreIsGivenAsAUrl) {
  auto o =
      std::get<ServeOptions>(parse({"--store", "etcd://10.0.0.1:2379,10.0.0.2:2379/kvq-prod"}));
  EXPECT_EQ(o.store, "etcd://10.0.0.1:2379,10.0.0.2:2379/kvq-prod");
  EXPECT_NE(std::get<std::string>(parse({"--store", "redis://x"})).find("etcd://"),
            std::string::npos);
}

TEST(ServeOptionsTest, AConfigValueKeepsAHashAndAnEqualsSign) {
  testing::TempDir dir;
  std::ofstream(dir.sub("kvq.conf"))
      << "token = s3cr#t=x==  # a comment after a blank\n"
      << "etcd-password = \"p#ss = \\\"w\\\\d\\\" #\"   # quoted: blanks and ' #' kept\n"
      << "etcd-user = 'a \"b\" #c\\'\n"
      << "  # an indented comment\n"
      << "data = /srv/kvq#1\n";
  auto parsed = parse({"--config", dir.sub("kvq.conf")});
  ASSERT_TRUE(std::holds_alternative<ServeOptions>(parsed)) << std::get<std::string>(parsed);
  auto o = std::get<ServeOptions>(parsed);
  EXPECT_EQ(o.token, "s3cr#t=x==");
  EXPECT_EQ(o.etcd_password, "p#ss = \"w\\d\" #");
  EXPECT_EQ(o.etcd_user, "a \"b\" #c\\");
  EXPECT_EQ(o.data, "/srv/kvq#1");
}

TEST(ServeOptionsTest, ABadlyQuotedConfigValueIsAnErrorNamingItsLine) {
  testing::TempDir dir;
  for (const std::string bad :
       {"token = \"open\n", "token = \"a\" b\n", "token = 'x\n", "token = \"a\\qb\"\n", " = v\n"}) {
    std::ofstream(dir.sub("bad.conf")) << "listen = 127.0.0.1:1\n" << bad;
    auto parsed = parse({"--config", dir.sub("bad.conf")});
    ASSERT_TRUE(std::holds_alternative<std::string>(parsed)) << bad;
    EXPECT_NE(std::get<std::string>(parsed).find("bad.conf:2: "), std::string::npos)
        << std::get<std::string>(parsed);
  }
}

TEST(ServeOptionsTest, ConfigFileErrorsNameTheLine) {
  testing::TempDir dir;
  std::ofstream(dir.sub("bad.conf")) << "listen = 127.0.0.1:1\nio-threads = 0\n";
  auto error = std::get<std::string>(parse({"--config", dir.sub("bad.conf")}));
  EXPECT_NE(error.find("bad.conf:2"), std::string::npos) << error;
}

TEST(ServeOptionsTest, LogFlagsAreCheckedByName) {
  auto o = std::get<ServeOptions>(parse({}));
  EXPECT_EQ(o.log_level, "info");
  EXPECT_EQ(o.log_format, "text");
  o = std::get<ServeOptions>(parse({"--log-format", "json", "--log-level=warn"}));
  EXPECT_EQ(o.log_format, "json");
  EXPECT_EQ(o.log_level, "warn");
  EXPECT_EQ(std::get<std::string>(parse({"--log-format", "xml"})),
            "--log-format wants text or json");
  EXPECT_EQ(std::get<std::string>(parse({"--log-level", "warning"})),
            "--log-level wants error, warn, info or debug");
}

TEST(ServeOptionsTest, TheCommandLineKeepsItsWording) {
  EXPECT_EQ(std::get<std::string>(parse({"--data"})), "option --data needs a value");
  EXPECT_EQ(std::get<std::string>(parse({"stray"})), "unexpected argument 'stray'");
  EXPECT_EQ(std::get<std::string>(parse({"--frobnicate=1"})), "unknown option 'frobnicate'");
  EXPECT_TRUE(std::get<ServeOptions>(parse({"--frobnicate", "-h"})).help);
  EXPECT_TRUE(std::get<ServeOptions>(parse({"--help"})).help);
  // The last of a repeated flag wins, as on the command line of any tool.
  EXPECT_EQ(std::get<ServeOptions>(parse({"--data", "a", "--data=b"})).data, "b");
}

TEST(ServeOptionsTest, AListenHostMayBeAName) {
  EXPECT_EQ(std::get<ServeOptions>(parse({"--listen", "localhost:7411"})).listen, "localhost:7411");
  EXPECT_EQ(std::get<ServeOptions>(parse({"--listen", "localhost:0"})).listen, "localhost:0");
}

TEST(ServeOptionsTest, TheBeanstalkdProtocolIsOffByDefault) {
  auto o = std::get<ServeOptions>(parse({}));
  EXPECT_EQ(o.beanstalk_listen, "");
  EXPECT_FALSE(o.beanstalk_allow_remote);
  EXPECT_EQ(o.beanstalk_max_job_size, 65535u);
}

TEST(ServeOptionsTest, TheBeanstalkdListenerTakesLoopbackAddresses) {
  for (const char* address : {"127.0.0.1:11300", "127.1.2.3:0", "localhost:11300", "[::1]:11300"}) {
    auto parsed = parse({"--beanstalk-listen", address});
    ASSERT_TRUE(std::holds_alternative<ServeOptions>(parsed))
        << address << ": " << std::get<std::string>(parsed);
    EXPECT_EQ(std::get<ServeOptions>(parsed).beanstalk_listen, address);
  }
}

TEST(ServeOptionsTest, ARemoteBeanstalkdListenerNeedsItsOwnFlag) {
  for (const char* address : {"0.0.0.0:11300", "10.1.2.3:11300", "[::]:11300", "example.com:11300",
                              "127.0.0.1.example.com:1", "128.0.0.1:1"}) {
    auto parsed = parse({"--beanstalk-listen", address});
    ASSERT_TRUE(std::holds_alternative<std::string>(parsed)) << address << " was accepted";
    const std::string& error = std::get<std::string>(parsed);
    EXPECT_NE(error.find("not a loopback address"), std::string::npos) << error;
    EXPECT_NE(error.find("--beanstalk-allow-remote"), std::string::npos) << error;
    EXPECT_NE(error.find("--token"), std::string::npos) << error;
  }
  auto o = std::get<ServeOptions>(
      parse({"--beanstalk-listen", "0.0.0.0:11300", "--beanstalk-allow-remote"}));
  EXPECT_EQ(o.beanstalk_listen, "0.0.0.0:11300");
  EXPECT_TRUE(o.beanstalk_allow_remote);
}

TEST(ServeOptionsTest, BeanstalkdSettingsComeFromTheConfigFileToo) {
  testing::TempDir dir;
  std::ofstream(dir.sub("kvq.conf")) << "beanstalk-listen = 0.0.0.0:11300\n"
                                     << "beanstalk-allow-remote = true\n"
                                     << "beanstalk-max-job-size = 1000\n";
  auto parsed = parse({"--config", dir.sub("kvq.conf")});
  ASSERT_TRUE(std::holds_alternative<ServeOptions>(parsed)) << std::get<std::string>(parsed);
  auto o = std::get<ServeOptions>(parsed);
  EXPECT_EQ(o.beanstalk_listen, "0.0.0.0:11300");
  EXPECT_TRUE(o.beanstalk_allow_remote);
  EXPECT_EQ(o.beanstalk_max_job_size, 1000u);
}

TEST(ServeOptionsTest, BeanstalkdValuesAreChecked) {
  EXPECT_NE(std::get<std::string>(parse({"--beanstalk-listen", "nowhere"})).find("HOST:PORT"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--beanstalk-max-job-size", "0"})).find("1..262144"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(parse({"--beanstalk-max-job-size", "262145"})).find("1..262144"),
            std::string::npos);
  EXPECT_EQ(
      std::get<ServeOptions>(parse({"--beanstalk-max-job-size", "262144"})).beanstalk_max_job_size,
      262144u);
}

TEST(ServeOptionsTest, TheUsageNamesTheBeanstalkdFlags) {
  const std::string usage = kServeUsage;
  for (const char* flag :
       {"--beanstalk-listen", "--beanstalk-allow-remote", "--beanstalk-max-job-size"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace kvq::app
