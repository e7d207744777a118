// Tests of common/text.h: quoting untrusted text in status messages and the
// name and address rules every service applies.
#include "common/text.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace sojourn {
namespace {

// Short printable text is unchanged; long text is cut and says its length;
// non-printable bytes are escaped and never cut in the middle.
TEST(ExcerptTest, ShortensAndEscapes) {
  EXPECT_EQ(Excerpt("good-a"), "good-a");
  EXPECT_EQ(Excerpt(""), "");
  const std::string long_text(20000, 'a');
  const std::string e = Excerpt(long_text);
  EXPECT_LE(e.size(), kExcerptBytes + 24);
  EXPECT_EQ(e.substr(0, kExcerptBytes), std::string(kExcerptBytes, 'a'));
  EXPECT_NE(e.find("(20000 bytes)"), std::string::npos);
  EXPECT_EQ(Excerpt(std::string("a\0b\nc", 5)), "a\\x00b\\nc");
  // 10 bytes of budget: "ab" then "\x00" (4 bytes) twice = 10; the third escape does not fit.
  EXPECT_EQ(Excerpt(std::string("ab\0\0\0", 5), 10), "ab\\x00\\x00\xe2\x80\xa6(5 bytes)");
  EXPECT_EQ(Excerpt(std::string(64, 'x')), std::string(64, 'x'));  // exactly the limit
}

// Host names: 1..255 bytes, no control character, not only whitespace;
// lookups only refuse what cannot be a stored name.
TEST(ValidateHostNameTest, AppliesTheSharedRules) {
  EXPECT_TRUE(ValidateHostName("good-a").ok());
  EXPECT_TRUE(ValidateHostName("h\xc3\xb4st").ok());  // UTF-8 is fine
  EXPECT_TRUE(ValidateHostName(std::string(255, 'h')).ok());
  for (const std::string& bad : {std::string(), std::string(256, 'h'), std::string("a\0b", 3),
                                std::string("a/b\nc"), std::string("   "), std::string("x\x7f")}) {
    absl::Status s = ValidateHostName(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << Excerpt(bad);
    EXPECT_FALSE(s.message().empty());
    EXPECT_LT(s.message().size(), 200u);
  }
  absl::Status huge = ValidateHostName(std::string(100000, 'x'));
  EXPECT_TRUE(absl::IsInvalidArgument(huge));
  EXPECT_LT(huge.message().size(), 200u);
  EXPECT_NE(huge.message().find("100000"), std::string::npos);
  EXPECT_TRUE(ValidateLookupName("a/b\nc").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateLookupName(std::string(300, 'h'))));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateLookupName("")));
}

// Addresses: bounded, no whitespace or control characters.
// Well-formed UTF-8 passes; what a proto3 string field would refuse does not.
TEST(IsValidUtf8Test, RejectsMalformedSequences) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("vm-17"));
  EXPECT_TRUE(IsValidUtf8("h\xc3\xb4te"));          // ô
  EXPECT_TRUE(IsValidUtf8("\xe2\x82\xac"));          // €
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x96\xa5"));     // U+1F5A5
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));     // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xff\xfe"));              // never in UTF-8
  EXPECT_FALSE(IsValidUtf8("\x80"));                   // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xc3"));                   // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));              // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));         // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));         // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));    // U+110000
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));              // truncated €
  EXPECT_FALSE(IsValidUtf8("\xe2\x28\xa1"));         // bad continuation
}

// Addresses a service is dialled on (RegisterHost's statemgr_address, the
// predictor's, --advertise_address): HOST:PORT only.
TEST(ValidateHostPortAddressTest, HostAndPortOnly) {
  for (const char* ok : {"127.0.0.1:7403", "statemgr-host1:7403", "dns:///statemgr.lab:65535",
                         "[::1]:1", "[fe80::1%eth0]:7403", "0.0.0.0:7403"}) {
    EXPECT_TRUE(ValidateHostPortAddress(ok, "statemgr_address").ok()) << ok;
  }
  for (const char* bad : {"localhost", "::::", "h:abc", "h:-1", "h:+1", "h:", "h:1:2", "[::1]",
                          "unix:/run/s.sock", "h:0", "h:65536", ":7403", "[zz]:1", "a b:1"}) {
    absl::Status s = ValidateHostPortAddress(bad, "--advertise_address");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_NE(s.message().find("--advertise_address"), std::string::npos) << s.message();
  }
}

// What the CLIs, sojourn-replay and the services' peer flags dial: HOST:PORT
// or a gRPC target with a scheme; dns:/// needs a port too (gRPC's DNS
// resolver would dial 443, as for a bare host).
TEST(ValidateDialAddressTest, PortsWhereGrpcWouldGuessOne) {
  for (const char* ok : {"127.0.0.1:7401", "dns:///localhost:7401", "unix:/run/sojourn/b.sock",
                         "ipv4:127.0.0.1:7401", "ipv4:10.0.0.1:7401,10.0.0.2:7401",
                         "ipv6:[::1]:7401", "dns:localhost:7401", "dns://8.8.8.8/lab.example:7401",
                         "unix-abstract:sojourn", "unix:relative.sock", "ipv4:///127.0.0.1:9",
                         "ipv6:///[::1]:9", "dns:/lab.example:7401"}) {
    EXPECT_TRUE(ValidateDialAddress(ok, "--broker").ok()) << ok;
  }
  // After a scheme too: nothing, no port (gRPC dials 443 for dns:, 0 for ipv4:), a bad one.
  for (const char* bad : {"localhost", "dns:///localhost", "dns:///h:", "dns:///h:99999", "unix:",
                          "unix-abstract:", "vsock:", "ipv4:", "ipv4:127.0.0.1",
                          "ipv4:10.0.0.1:7401,10.0.0.2", "ipv6:[::1]", "dns:localhost",
                          "dns:127.0.0.1", "dns://8.8.8.8/", "dns:h:99999", "ipv4:1.2.3.4:9,"}) {
    absl::Status s = ValidateDialAddress(bad, "--broker");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_NE(s.message().find("--broker"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::string("'") + bad), std::string::npos) << s.message();
  }
}

TEST(ValidateAddressTest, BoundedWithoutWhitespace) {
  EXPECT_TRUE(ValidateAddress("127.0.0.1:7403", "statemgr_address").ok());
  EXPECT_TRUE(ValidateAddress("unix:/run/sojourn/statemgr.sock", "a").ok());
  EXPECT_TRUE(ValidateAddress("dns:///statemgr.lab:65535", "a").ok());
  EXPECT_TRUE(ValidateAddress("[::1]:1", "a").ok());
  EXPECT_TRUE(ValidateAddress("::1", "a").ok());  // no port: gRPC's default
  // gRPC would dial 99999 - 65536 = 34463 without a word.
  for (const char* bad : {"127.0.0.1:99999", "127.0.0.1:0", "host:65536", "[::1]:123456789012"}) {
    absl::Status s = ValidateAddress(bad, "--statemgr");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("port must be in [1, 65535]"), std::string::npos) << s.message();
  }
  for (const std::string& bad : {std::string(), std::string(20000, 'a'), std::string("a b:1"),
                                std::string("h:1\n"), std::string("h\t:1")}) {
    absl::Status s = ValidateAddress(bad, "statemgr_address");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << Excerpt(bad);
    EXPECT_NE(s.message().find("statemgr_address"), std::string::npos);
    EXPECT_LT(s.message().size(), 200u);
  }
}

// The formats the trace and SWF readers tell by their first bytes. A text
// starting with "BZh" is text; so is anything shorter than a magic number.
// The exporters' numbers: as short as can be, read back to the same double.
TEST(AppendShortestTest, ShortestThatReadsBack) {
  for (double v :
       {0.1, 1.0 / 3, 0.2952547521773506, 12345.5, 27758.0, -1.0, 1e-300, 1.7976931348623157e308}) {
    std::string s = "x";
    AppendShortest(&s, v);
    ASSERT_EQ(s[0], 'x');
    EXPECT_EQ(std::strtod(s.c_str() + 1, nullptr), v) << s;
  }
  std::string s;
  AppendShortest(&s, 0.1);
  AppendShortest(&s, 27758.0);
  AppendShortest(&s, -1.0);
  EXPECT_EQ(s, "0.127758-1");
}

TEST(CompressionOfTest, TellsFormatsByTheirFirstBytes) {
  using S = absl::string_view;
  EXPECT_EQ(S(CompressionOf(S("\x1f\x8b\x08\x00", 4))), "gzip");
  EXPECT_EQ(S(CompressionOf(S("\xFD" "7zXZ\x00\x00\x04", 8))), "xz");
  EXPECT_EQ(S(CompressionOf(S("BZh91AY&SY", 10))), "bzip2");
  EXPECT_EQ(S(CompressionOf(S("BZh9\x17\x72\x45\x38\x50\x90", 10))), "bzip2");  // empty stream
  EXPECT_EQ(S(CompressionOf(S("\x28\xB5\x2F\xFD\x00", 5))), "zstd");
  EXPECT_EQ(S(CompressionOf(S("\x04\x22\x4D\x18\x00", 5))), "lz4");
  EXPECT_EQ(S(CompressionOf(S("PK\x03\x04rest", 8))), "zip");
  EXPECT_EQ(S(CompressionOf("BZhost,100,0.5,1024\n")), "");
  EXPECT_EQ(S(CompressionOf("BZh9")), "");
  EXPECT_EQ(S(CompressionOf("host,timestamp,cpu_load\n")), "");
  EXPECT_EQ(S(CompressionOf("")), "");
}

}  // namespace
}  // namespace sojourn
