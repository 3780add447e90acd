// Sends thousands of mutated JSON-RPC messages (seeded, reproducible) to the real binary over
// stdio and over HTTP, then checks that it still answers ping. Over HTTP also: mutated chunked
// bodies, Host/Origin forms built around loopback names, and connections left hanging.

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <random>

#include "integration/server_test_support.hpp"

namespace autocomp::test {
namespace {

const std::vector<std::string> k_seeds = {
    R"({"jsonrpc":"2.0","id":1,"method":"ping"})",
    R"({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"page:1"}})",
    R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}})",
    R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"json_schema_2020_12_tool","arguments":{"name":"a","email":"b","address":{"city":"c"}},"_meta":{"progressToken":7}}})",
    R"({"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"test://template/12/data"}})",
    R"({"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"test_prompt_with_arguments","arguments":{"arg1":"x","arg2":"y"}}})",
    R"({"jsonrpc":"2.0","id":"s","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"pa"}}})",
    R"({"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"debug"}})",
    R"({"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"f","version":"1"}}})",
    R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}})",
    R"({"jsonrpc":"2.0","id":"autocomp-1","result":{"roots":[]}})",
    R"({"jsonrpc":"2.0","id":10,"method":"resources/subscribe","params":{"uri":"test://watched-resource"}})",
};

const std::vector<std::string> k_replacements = {"null",
                                                 "true",
                                                 "[]",
                                                 "{}",
                                                 "\"\"",
                                                 "-1",
                                                 "0",
                                                 "1e999999",
                                                 "-1e400",
                                                 "123456789012345678901234567890",
                                                 "3.14159",
                                                 "\"\\u0000\"",
                                                 "\"\\ud800\"",
                                                 "[[[[[[[[[[]]]]]]]]]]",
                                                 "{\"a\":{\"b\":{\"c\":[1,2,{}]}}}"};

std::string random_unicode(std::mt19937& rng) {
  static const std::vector<std::string> k_pieces = {
      "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xED\xA0\x80", "\xC0\xAF", "\xFF",
      "\xE2\x82", "\\u00e9",      "\\uDEAD",          "\x7F",         "\t",       "\\",
      "\""};
  std::string out;
  const int count = 1 + static_cast<int>(rng() % 6);
  for (int i = 0; i < count; ++i) {
    out += k_pieces[rng() % k_pieces.size()];
  }
  return out;
}

// One mutation of one seed. Newlines are stripped so that stdio framing stays one per line.
std::string mutate(std::mt19937& rng) {
  std::string text = k_seeds[rng() % k_seeds.size()];
  const int kind = static_cast<int>(rng() % 9);
  switch (kind) {
    case 0: {  // byte flips
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < flips && !text.empty(); ++i) {
        text[rng() % text.size()] = static_cast<char>(rng() % 256);
      }
      break;
    }
    case 1:  // truncation
      text.resize(rng() % text.size());
      break;
    case 2: {  // type swap of a value
      auto json = nlohmann::json::parse(text);
      std::vector<nlohmann::json*> slots;
      std::function<void(nlohmann::json&)> collect = [&](nlohmann::json& node) {
        if (node.is_object()) {
          for (auto& [key, value] : node.items()) {
            slots.push_back(&value);
            collect(value);
          }
        }
      };
      collect(json);
      if (!slots.empty()) {
        *slots[rng() % slots.size()] = nlohmann::json::parse(
            k_replacements[rng() % k_replacements.size()], nullptr, false, true);
      }
      text = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      break;
    }
    case 3: {  // deep nesting
      const std::size_t depth = 50 + rng() % 5000;
      text = std::string(depth, '[') + text + std::string(rng() % 2 ? depth : depth / 2, ']');
      break;
    }
    case 4: {  // huge numbers
      const std::size_t at = text.find("\"id\":");
      if (at != std::string::npos) {
        text.insert(at + 5, std::string(1 + rng() % 400, '9') + "0,\"x\":");
      } else {
        text += std::string(rng() % 1000, '9');
      }
      break;
    }
    case 5:  // random unicode inside the text
      text.insert(rng() % text.size(), random_unicode(rng));
      break;
    case 6: {  // remove a span
      const std::size_t from = rng() % text.size();
      text.erase(from, rng() % (text.size() - from + 1));
      break;
    }
    case 7:  // duplicate a span
      text += text.substr(rng() % text.size());
      break;
    default: {  // unicode inside a string value
      const std::size_t quote = text.rfind('"');
      if (quote != std::string::npos) {
        text.insert(quote, random_unicode(rng));
      }
      break;
    }
  }
  for (char& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return text;
}

constexpr int k_stdio_messages = 6000;
constexpr int k_http_messages = 5000;

TEST(ServerFuzz, StdioSurvivesMutatedMessages) {
  Child server({"--conformance-fixtures"});
  server.initialize();
  std::mt19937 rng(20261122);
  std::atomic<bool> done{false};
  std::atomic<int> lines{0};
  std::atomic<bool> saw_final_pong{false};
  // Drain stdout concurrently so that the server never blocks on a full pipe.
  std::thread reader([&] {
    while (!done) {
      auto line = server.read_line(200ms);
      if (!line) {
        continue;
      }
      ++lines;
      auto message = nlohmann::json::parse(*line, nullptr, false);
      EXPECT_FALSE(message.is_discarded()) << "non-JSON on stdout: " << line->substr(0, 200);
      if (!message.is_discarded() && message.value("id", nlohmann::json()) == "final-ping" &&
          message.contains("result")) {
        saw_final_pong = true;
        return;
      }
    }
  });
  for (int i = 0; i < k_stdio_messages; ++i) {
    ASSERT_TRUE(server.send(mutate(rng))) << "server closed stdin after " << i << " messages";
  }
  server.send(std::string(R"({"jsonrpc":"2.0","id":"final-ping","method":"ping"})"));
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!saw_final_pong && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  done = true;
  reader.join();
  EXPECT_TRUE(saw_final_pong) << "no answer to ping after " << k_stdio_messages
                              << " mutated messages (" << lines << " lines seen)";
  EXPECT_GT(lines, k_stdio_messages / 2);
  server.close_stdin();
  EXPECT_EQ(server.wait_exit(10s), 0);
}

TEST(ServerFuzz, HttpSurvivesMutatedMessages) {
  HttpChild server({"--conformance-fixtures"});
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(10, 0);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  const httplib::Headers base = {{"Accept", "application/json"}};
  auto init = client.Post(
      "/mcp", base,
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}})",
      "application/json");
  ASSERT_TRUE(init);
  const std::string session = init->get_header_value("Mcp-Session-Id");
  ASSERT_FALSE(session.empty());
  httplib::Headers headers = base;
  headers.emplace("Mcp-Session-Id", session);
  std::mt19937 rng(1122);
  int server_errors = 0;
  int answered = 0;
  int rejected = 0;
  for (int i = 0; i < k_http_messages; ++i) {
    const std::string message = mutate(rng);
    auto response = client.Post("/mcp", headers, message, "application/json");
    ASSERT_TRUE(response) << "connection failed after " << i
                          << " messages; last: " << message.substr(0, 300);
    server_errors += response->status >= 500 ? 1 : 0;
    answered += response->status == 200 ? 1 : 0;
    rejected += response->status == 400 ? 1 : 0;
  }
  EXPECT_EQ(server_errors, 0);
  EXPECT_GT(answered, k_http_messages / 20);  // the mix really exercised both paths
  EXPECT_GT(rejected, k_http_messages / 10);
  auto pong = client.Post("/mcp", headers, R"({"jsonrpc":"2.0","id":"final","method":"ping"})",
                          "application/json");
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->status, 200);
  EXPECT_EQ(nlohmann::json::parse(pong->body)["id"], "final");
}

// Host and Origin forms built from loopback names and attacker parts: every hostile form is
// refused (400/403), every plain loopback form with the right port is served.
TEST(ServerFuzz, HttpHostAndOriginFormsAreJudgedRight) {
  HttpChild server({"--conformance-fixtures"});
  ASSERT_GT(server.port(), 0);
  const std::string port = std::to_string(server.port());
  const std::vector<std::string> loopback = {"127.0.0.1", "localhost", "[::1]", "127.8.9.10",
                                             "LOCALHOST"};
  const std::vector<std::string> attacker = {"evil.example", "attacker.example", "10.0.0.1",
                                             "192.168.1.1",  "0.0.0.0",          "example.com"};
  std::mt19937 rng(424242);
  const std::string body =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}})";
  // Hostile forms; an Origin may name a loopback host on any port, so case 5 is for Host only.
  auto hostile = [&](const std::string& name, bool for_origin) -> std::string {
    const std::string& evil = attacker[rng() % attacker.size()];
    std::size_t form = rng() % 9;
    if (for_origin && form == 5) {
      form = 0;
    }
    switch (form) {
      case 0:
        return name + "." + evil;
      case 1:
        return name + "@" + evil;
      case 2:
        return evil + "@" + name;
      case 3:
        return name + "." + evil + ":" + port;
      case 4:
        return evil + ":" + port;
      case 5:
        return name + ":" + std::to_string(1 + (server.port() + 1 + rng() % 1000) % 65535);
      case 6:
        return name + "%00." + evil;
      case 7:
        return name.substr(0, 1 + rng() % name.size()) + "." + evil;
      default:
        return name + " " + evil;
    }
  };
  int refused = 0;
  int served = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string& name = loopback[rng() % loopback.size()];
    const bool bad = rng() % 3 != 0;
    const bool via_origin = rng() % 2 == 0;
    std::string host = name + ":" + port;
    std::string origin;
    if (bad && via_origin) {
      origin = (rng() % 2 ? "http://" : "https://") + hostile(name, true);
    } else if (bad) {
      host = hostile(name, false);
    } else if (via_origin) {
      origin = "http://" + name + ":" + std::to_string(1 + rng() % 65535);
    }
    RawConnection raw(server.port());
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw.send("POST /mcp HTTP/1.1\r\nHost: " + host + "\r\n" +
                         (origin.empty() ? "" : "Origin: " + origin + "\r\n") +
                         "Content-Type: application/json\r\nConnection: close\r\n"
                         "Content-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
    const int status = status_of(raw.read_all(5s));
    if (bad) {
      EXPECT_TRUE(status == 403 || status == 400) << host << " / " << origin << " -> " << status;
      refused += status == 403 || status == 400 ? 1 : 0;
    } else {
      EXPECT_EQ(status, 200) << host << " / " << origin;
      served += status == 200 ? 1 : 0;
    }
  }
  EXPECT_GT(refused, 100);
  EXPECT_GT(served, 50);
}

// Chunked bodies with random chunk sizes, malformed size lines, truncations, and connections
// left hanging mid-request: nothing is answered 5xx, and ping is served at the end.
TEST(ServerFuzz, HttpSurvivesHostileFramingAndHeldConnections) {
  HttpChild server({"--conformance-fixtures", "--max-message-bytes", "100000"});
  ASSERT_GT(server.port(), 0);
  const std::string host = "127.0.0.1:" + std::to_string(server.port());
  std::mt19937 rng(777);
  std::vector<std::unique_ptr<RawConnection>> hanging;
  int server_errors = 0;
  int too_large = 0;
  for (int i = 0; i < 200; ++i) {
    auto raw = std::make_unique<RawConnection>(server.port());
    ASSERT_TRUE(raw->ok());
    std::string request = "POST /mcp HTTP/1.1\r\nHost: " + host +
                          "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                          "Connection: close\r\n\r\n";
    const std::string message = mutate(rng);
    const int kind = static_cast<int>(rng() % 6);
    std::size_t at = 0;
    char size[32];
    switch (kind) {
      case 0:  // the message in random chunk sizes
        while (at < message.size()) {
          const std::size_t n = std::min<std::size_t>(1 + rng() % 64, message.size() - at);
          std::snprintf(size, sizeof(size), "%zx\r\n", n);
          request += size + message.substr(at, n) + "\r\n";
          at += n;
        }
        request += "0\r\n\r\n";
        break;
      case 1:  // a malformed size line
        request += std::string(rng() % 2 ? "zz" : "g1") + "\r\n" + message + "\r\n0\r\n\r\n";
        break;
      case 2:  // a size far beyond the data and the limit
        request += "ffffffffff\r\n" + message;
        break;
      case 3:  // many chunks beyond the limit
        for (int c = 0; c < 40; ++c) {
          request += "1000\r\n" + std::string(4096, ' ') + "\r\n";
        }
        request += "0\r\n\r\n";
        break;
      case 4:  // left hanging mid-body
        std::snprintf(size, sizeof(size), "%zx\r\n", message.size() + 100);
        request += size + message;
        break;
      default:  // left hanging mid-headers
        request = "POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nX-Partial: ";
        break;
    }
    if (!raw->send(request)) {
      continue;  // refused early
    }
    if (kind >= 4 || kind == 2) {
      hanging.push_back(std::move(raw));
      continue;
    }
    const int status = status_of(raw->read_all(5s));
    server_errors += status >= 500 ? 1 : 0;
    too_large += status == 413 ? 1 : 0;
    EXPECT_NE(status, 0) << "no answer to framing kind " << kind;
  }
  EXPECT_EQ(server_errors, 0);
  EXPECT_GT(too_large, 10);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(10, 0);
  auto pong =
      client.Post("/mcp", R"({"jsonrpc":"2.0","id":"final","method":"ping"})", "application/json");
  ASSERT_TRUE(pong) << hanging.size() << " connections hanging";
  EXPECT_EQ(pong->status, 200);
}

}  // namespace
}  // namespace autocomp::test
