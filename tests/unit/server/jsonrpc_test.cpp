#include "server/jsonrpc.hpp"

#include <gtest/gtest.h>

namespace autocomp::server::jsonrpc {
namespace {

int error_code(const Message& message) {
  const auto* invalid = std::get_if<Invalid>(&message);
  return invalid == nullptr ? 0 : invalid->error_response["error"]["code"].get<int>();
}

TEST(JsonRpcParse, AcceptsRequestNotificationAndResponse) {
  Limits limits;
  auto request = parse(R"({"jsonrpc":"2.0","id":7,"method":"ping"})", limits);
  ASSERT_TRUE(std::holds_alternative<Request>(request));
  EXPECT_EQ(std::get<Request>(request).id, 7);
  EXPECT_EQ(std::get<Request>(request).method, "ping");

  auto notification = parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", limits);
  ASSERT_TRUE(std::holds_alternative<Notification>(notification));

  auto response = parse(R"({"jsonrpc":"2.0","id":"a","result":{}})", limits);
  ASSERT_TRUE(std::holds_alternative<Response>(response));
  EXPECT_TRUE(std::get<Response>(response).result.has_value());
}

TEST(JsonRpcParse, MalformedJsonIsParseError) {
  EXPECT_EQ(error_code(parse("{\"jsonrpc\":", Limits{})), k_parse_error);
  EXPECT_EQ(error_code(parse("", Limits{})), k_parse_error);
}

TEST(JsonRpcParse, NulBytesAnywhereAreParseErrors) {
  const Limits limits;
  const std::string message = R"({"jsonrpc":"2.0","id":1,"method":"ping"})";
  for (const std::string& raw :
       {message + std::string(1, '\0'), message + std::string("\0garbage", 8),
        std::string("\0", 1) + message}) {
    EXPECT_EQ(error_code(parse(raw, limits)), k_parse_error) << raw.size();
  }
  EXPECT_EQ(error_code(parse(message, limits)), 0);
}

TEST(JsonRpcParse, InvalidUtf8IsParseError) {
  const std::string bad =
      std::string(R"({"jsonrpc":"2.0","id":1,"method":"p)") + "\xC3\x28" + "\"}";
  EXPECT_EQ(error_code(parse(bad, Limits{})), k_parse_error);
}

TEST(JsonRpcParse, WrongVersionKeepsTheIdInTheError) {
  auto message = parse(R"({"jsonrpc":"1.0","id":3,"method":"ping"})", Limits{});
  EXPECT_EQ(error_code(message), k_invalid_request);
  EXPECT_EQ(std::get<Invalid>(message).error_response["id"], 3);
}

TEST(JsonRpcParse, NullOrNonScalarIdsAreInvalid) {
  EXPECT_EQ(error_code(parse(R"({"jsonrpc":"2.0","id":null,"method":"ping"})", Limits{})),
            k_invalid_request);
  EXPECT_EQ(error_code(parse(R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})", Limits{})),
            k_invalid_request);
  EXPECT_EQ(error_code(parse(R"({"jsonrpc":"2.0","id":{},"method":"ping"})", Limits{})),
            k_invalid_request);
}

TEST(JsonRpcParse, BatchesAndScalarsAreRejected) {
  EXPECT_EQ(error_code(parse(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", Limits{})),
            k_invalid_request);
  EXPECT_EQ(error_code(parse("42", Limits{})), k_invalid_request);
}

TEST(JsonRpcParse, ParamsMustBeAnObject) {
  EXPECT_EQ(error_code(parse(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":[1]})", Limits{})),
            k_invalid_request);
}

TEST(JsonRpcParse, OversizeAndDeepMessagesAreRejected) {
  Limits limits;
  limits.max_message_bytes = 64;
  EXPECT_EQ(error_code(parse(std::string(100, ' '), limits)), k_invalid_request);
  Limits deep;
  const std::string nested = std::string(500, '[') + std::string(500, ']');
  EXPECT_EQ(error_code(parse(nested, deep)), k_invalid_request);
}

TEST(JsonRpcUtf8, ValidatesSequences) {
  EXPECT_TRUE(valid_utf8("plain"));
  EXPECT_TRUE(valid_utf8("\xE2\x82\xAC"));      // euro sign
  EXPECT_TRUE(valid_utf8("\xF0\x9F\x98\x80"));  // emoji
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));         // overlong
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));     // surrogate
  EXPECT_FALSE(valid_utf8("\xE2\x82"));         // truncated
  EXPECT_FALSE(valid_utf8("\xFF"));
}

TEST(JsonRpcDepth, IgnoresBracketsInStrings) {
  EXPECT_EQ(json_depth(R"({"a":"[[[[{{{{"})", 100), 1u);
  EXPECT_EQ(json_depth(R"({"a":[{"b":[]}]})", 100), 4u);
}

TEST(JsonRpcBuild, ErrorCarriesCodeMessageAndData) {
  auto error = make_error(5, k_invalid_params, "bad", {{"field", "x"}});
  EXPECT_EQ(error["jsonrpc"], "2.0");
  EXPECT_EQ(error["id"], 5);
  EXPECT_EQ(error["error"]["code"], k_invalid_params);
  EXPECT_EQ(error["error"]["data"]["field"], "x");
}

}  // namespace
}  // namespace autocomp::server::jsonrpc
