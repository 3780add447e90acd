#include "server/schema.hpp"

#include <gtest/gtest.h>

namespace autocomp::server {
namespace {

const nlohmann::json k_schema = nlohmann::json::parse(R"({
  "type": "object",
  "properties": {
    "kernel_path": {"type": "string", "minLength": 1},
    "seeds": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 3},
    "device": {"type": "string", "enum": ["sim", "neuron"]},
    "iters": {"type": "integer", "minimum": 1, "maximum": 1000},
    "options": {"type": "object", "properties": {"warmup": {"type": "integer"}},
                "additionalProperties": false}
  },
  "required": ["kernel_path"],
  "additionalProperties": false
})");

TEST(Schema, AcceptsConformingArguments) {
  EXPECT_FALSE(validate_schema(k_schema, {{"kernel_path", "k.py"},
                                          {"seeds", {0, 1}},
                                          {"device", "sim"},
                                          {"iters", 10},
                                          {"options", {{"warmup", 2}}}}));
}

TEST(Schema, NamesTheMissingField) {
  auto error = validate_schema(k_schema, nlohmann::json::object());
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("kernel_path"), std::string::npos) << *error;
}

TEST(Schema, NamesTheFieldWithTheWrongType) {
  auto error = validate_schema(k_schema, {{"kernel_path", 3}});
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("arguments.kernel_path: expected string, got integer"), std::string::npos)
      << *error;
}

TEST(Schema, ChecksEnumBoundsLengthItemsAndUnknownFields) {
  EXPECT_TRUE(validate_schema(k_schema, {{"kernel_path", "k"}, {"device", "gpu"}}));
  EXPECT_TRUE(validate_schema(k_schema, {{"kernel_path", "k"}, {"iters", 0}}));
  EXPECT_TRUE(validate_schema(k_schema, {{"kernel_path", "k"}, {"iters", 1001}}));
  EXPECT_TRUE(validate_schema(k_schema, {{"kernel_path", ""}}));
  EXPECT_TRUE(validate_schema(k_schema, {{"kernel_path", "k"}, {"seeds", {1, -1}}}));
  EXPECT_TRUE(validate_schema(k_schema, {{"kernel_path", "k"}, {"seeds", {1, 2, 3, 4}}}));
  auto unknown = validate_schema(k_schema, {{"kernel_path", "k"}, {"kernel", "x"}});
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->find("arguments.kernel: unknown field"), std::string::npos) << *unknown;
  auto nested = validate_schema(k_schema, {{"kernel_path", "k"}, {"options", {{"warmup", "x"}}}});
  ASSERT_TRUE(nested);
  EXPECT_NE(nested->find("arguments.options.warmup"), std::string::npos) << *nested;
}

TEST(Schema, IntegerAcceptsIntegralFloatsOnly) {
  const nlohmann::json schema = {{"type", "integer"}};
  EXPECT_FALSE(validate_schema(schema, 3.0));
  EXPECT_TRUE(validate_schema(schema, 3.5));
  EXPECT_TRUE(validate_schema(schema, "3"));
}

TEST(Schema, CompositionAndConditionals) {
  const nlohmann::json schema = nlohmann::json::parse(R"({
    "type": "object",
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]}
  })");
  EXPECT_FALSE(validate_schema(schema, {{"email", "a@b"}}));
  EXPECT_TRUE(validate_schema(schema, nlohmann::json::object()));
  EXPECT_TRUE(validate_schema(schema, {{"contactMethod", "phone"}, {"email", "a@b"}}));
}

}  // namespace
}  // namespace autocomp::server
