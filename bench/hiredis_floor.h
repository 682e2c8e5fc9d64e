#pragma once
// The hand-written floor of the store benchmarks: hiredis on a unix socket, commands appended
// and their replies read in one go, as a careful user would pipeline them.
#include <hiredis/hiredis.h>

#include <stdexcept>
#include <string>
#include <vector>

struct Hiredis {
  explicit Hiredis(const std::string& socket) : c(redisConnectUnix(socket.c_str())) {
    if (c == nullptr || c->err) throw std::runtime_error("hiredis: cannot connect");
  }
  ~Hiredis() { redisFree(c); }
  Hiredis(const Hiredis&) = delete;
  Hiredis& operator=(const Hiredis&) = delete;
  void append(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
    ++pending;
  }
  // Reads every pending reply (the caller frees them).
  std::vector<redisReply*> flush() {
    std::vector<redisReply*> out;
    for (; pending > 0; --pending) {
      void* r = nullptr;
      if (redisGetReply(c, &r) != REDIS_OK) throw std::runtime_error("hiredis: no reply");
      out.push_back(static_cast<redisReply*>(r));
    }
    return out;
  }
  void drain() {
    for (redisReply* r : flush()) freeReplyObject(r);
  }
  redisContext* c;
  int pending = 0;
};
