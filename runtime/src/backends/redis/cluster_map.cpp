#include "backends/redis/cluster_map.h"

#include <algorithm>
#include <unordered_set>

#include <tensordict/errors.h>

#include "backends/redis/cluster_slot.h"

namespace tensordict {
namespace redis {

namespace {

// "host:port" of a redirection; a node announced without a host is at the answering one's.
NodeAddress redirect_node(std::string_view text, const NodeAddress& from) {
  if (!text.empty() && text.front() == ':') {
    NodeAddress out = parse_node_address(std::string(from.host.empty() ? "127.0.0.1" : from.host) + std::string(text), "redirection");
    return out;
  }
  return parse_node_address(text, "redirection");
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

SlotMap SlotMap::parse(ReplyRef reply, const NodeAddress& asked) {
  TD_CHECK(reply.is_array(), StorageError, asked.endpoint(), ": CLUSTER SLOTS: not a slot map (",
           reply.is_error() ? std::string(reply.str()) : std::string("not an array"), ")");
  SlotMap out;
  for (size_t i = 0; i < reply.size(); ++i) {
    const ReplyRef range = reply[i];
    TD_CHECK(range.is_array() && range.size() >= 3 && range[2].is_array() && range[2].size() >= 2, StorageError,
             asked.endpoint(), ": CLUSTER SLOTS: entry ", i, " is not [first, last, [host, port, ...], ...]");
    const long long first = range[0].integer(), last = range[1].integer();
    TD_CHECK(first >= 0 && first <= last && last < kClusterSlots, StorageError, asked.endpoint(),
             ": CLUSTER SLOTS: entry ", i, " has slots ", first, "..", last);
    NodeAddress node;
    node.host = std::string(range[2][0].str());
    // A node that does not know its own address announces "" or "?": it is the one asked.
    if (node.host.empty() || node.host == "?") node.host = asked.host;
    node.port = static_cast<int>(range[2][1].integer());
    out.ranges_.push_back({static_cast<int>(first), static_cast<int>(last), std::move(node)});
  }
  std::sort(out.ranges_.begin(), out.ranges_.end(), [](const Range& a, const Range& b) { return a.first < b.first; });
  return out;
}

const NodeAddress* SlotMap::master(int slot) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), slot, [](int s, const Range& r) { return s < r.first; });
  if (it == ranges_.begin()) return nullptr;
  --it;
  return slot <= it->last ? &it->master : nullptr;
}

void SlotMap::set_master(int slot, NodeAddress node) {
  // The range holding `slot` is cut around it.
  std::vector<Range> out;
  for (Range& r : ranges_) {
    if (slot < r.first || slot > r.last) {
      out.push_back(std::move(r));
      continue;
    }
    if (r.first < slot) out.push_back({r.first, slot - 1, r.master});
    if (slot < r.last) out.push_back({slot + 1, r.last, r.master});
  }
  out.push_back({slot, slot, std::move(node)});
  std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.first < b.first; });
  ranges_ = std::move(out);
}

std::vector<NodeAddress> SlotMap::masters() const {
  std::vector<NodeAddress> out;
  for (const Range& r : ranges_)
    if (std::find(out.begin(), out.end(), r.master) == out.end()) out.push_back(r.master);
  return out;
}

std::optional<Redirect> parse_redirect(ReplyRef reply, const NodeAddress& from) {
  if (!reply.is_error()) return std::nullopt;
  const std::string_view text = reply.str();
  const bool moved = starts_with(text, "MOVED "), ask = starts_with(text, "ASK ");
  if (moved || ask) {
    const std::string_view rest = text.substr(moved ? 6 : 4);
    const size_t space = rest.find(' ');
    TD_CHECK(space != std::string_view::npos, StorageError, from.endpoint(), ": a redirection without a node: ",
             std::string(text.substr(0, 128)));
    Redirect out{moved ? Redirect::Moved : Redirect::Ask, -1, {}};
    try {
      out.slot = std::stoi(std::string(rest.substr(0, space)));
    } catch (const std::exception&) {
      TD_THROW(StorageError, from.endpoint(), ": a redirection without a slot: ", std::string(text.substr(0, 128)));
    }
    out.node = redirect_node(rest.substr(space + 1), from);
    return out;
  }
  // The slot is between owners (a failover, a migration's last step), the node is loading its
  // dataset, or, for a script, some of its keys have left during a migration: nothing ran, and
  // it will run after a pause.
  if (starts_with(text, "TRYAGAIN") || starts_with(text, "CLUSTERDOWN") || starts_with(text, "LOADING") ||
      text.find("non local key") != std::string_view::npos)
    return Redirect{Redirect::Wait, -1, {}};
  return std::nullopt;
}

int command_slot(const Command& command) {
  if (command.size() < 2) return -1;
  static const std::unordered_set<std::string> keyless = {
      "MULTI", "EXEC",  "DISCARD", "UNWATCH", "WAIT",   "ASKING", "SCRIPT", "CLUSTER",  "PING",     "INFO",
      "AUTH",  "HELLO", "SELECT",  "CONFIG",  "DBSIZE", "SCAN",   "KEYS",   "FLUSHALL", "FLUSHDB", "READONLY"};
  std::string name = command[0];
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (keyless.count(name)) return -1;
  if (name == "EVAL" || name == "EVALSHA") {
    if (command.size() < 4 || command[2] == "0") return -1;
    return key_hash_slot(command[3]);
  }
  return key_hash_slot(command[1]);
}

}  // namespace redis
}  // namespace tensordict
