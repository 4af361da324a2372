// Graph partitions (dnngraph/partition.hpp): cutting a validated graph into standalone graphs,
// asking the engine whether it can build each candidate (cached per fingerprint), and growing
// the largest convex groups of connected ops it accepts.
#include "dnngraph/partition.hpp"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/log.hpp"
#include "engines/registry.hpp"

namespace dnngraph {
namespace {

using TensorMap = std::unordered_map<const ir::TensorAttrs*, ir::Tensor>;

// Who makes and who reads each tensor of the graph.
struct Wiring {
  std::unordered_map<const ir::TensorAttrs*, size_t> producer;
  std::unordered_map<const ir::TensorAttrs*, std::vector<size_t>> readers;
  std::vector<std::vector<size_t>> preds;  // per op: the ops whose outputs it reads, no repeats
};

Wiring wire(const ir::ValidatedGraph& v) {
  Wiring w;
  const auto& nodes = v.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const ir::Port& p : nodes[i].outputs)
      if (p.tensor) w.producer.emplace(p.tensor.get(), i);
  w.preds.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const ir::Port& p : nodes[i].inputs) {
      if (!p.tensor) continue;
      w.readers[p.tensor.get()].push_back(i);
      auto it = w.producer.find(p.tensor.get());
      if (it != w.producer.end() &&
          std::find(w.preds[i].begin(), w.preds[i].end(), it->second) == w.preds[i].end())
        w.preds[i].push_back(it->second);
    }
  return w;
}

// The tensors of n's score-modifier subgraphs: graph tensors (already in `copy`, bound to n's
// ports) map to their copies, the subgraphs' own tensors get private copies.
void copy_subgraphs(ir::Node& n, TensorMap& copy) {
  auto remap = [&](ir::Tensor& t) {
    if (!t) return;
    auto it = copy.find(t.get());
    if (it == copy.end()) it = copy.emplace(t.get(), std::make_shared<ir::TensorAttrs>(*t)).first;
    t = it->second;
  };
  for (ir::Subgraph& sg : n.subgraphs) {
    remap(sg.input);
    remap(sg.output);
    for (ir::Node& sn : sg.nodes)
      for (auto* ports : {&sn.inputs, &sn.outputs})
        for (ir::Port& p : *ports) remap(p.tensor);
  }
}

// The ops `in` marks (ascending indices `ops`) as a graph of their own, not validated.
std::unique_ptr<Graph> cut(const ir::ValidatedGraph& v, const Wiring& w,
                           const std::vector<size_t>& ops, const std::vector<char>& in,
                           std::string name) {
  auto g = std::make_unique<Graph>();
  g->set_name(std::move(name))
      .set_io_data_type(v.io_data_type())
      .set_intermediate_data_type(v.intermediate_data_type())
      .set_compute_data_type(v.compute_data_type())
      .set_dynamic_shape_enabled(v.dynamic_shape_enabled())
      .set_sm_count(v.sm_count());
  TensorMap copy;
  auto read_outside = [&](const ir::TensorAttrs* t) {
    auto it = w.readers.find(t);
    if (it == w.readers.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(), [&](size_t r) { return !in[r]; });
  };
  // A virtual tensor of v that the cut makes an input or an output is stored in memory between
  // the partitions: in the io data type where validate() only inferred the intermediate one (a
  // bf16 graph's boundaries are bf16, not fp32 as its virtual tensors are).
  auto stored = [&](const ir::TensorAttrs& t, ir::TensorAttrs& c) {
    if (t.is_virtual && t.data_type_inferred && v.io_data_type() != DataType::NotSet) {
      c.data_type = v.io_data_type();
      c.data_type_inferred = false;
    }
  };
  auto copy_of = [&](const ir::Tensor& t) -> ir::Tensor {
    if (!t) return t;
    if (auto it = copy.find(t.get()); it != copy.end()) return it->second;
    auto c = std::make_shared<ir::TensorAttrs>(*t);
    auto made = w.producer.find(t.get());
    if (made == w.producer.end() || !in[made->second]) {  // comes from outside: an input
      stored(*t, *c);
      c->is_virtual = false;
      c->is_output = false;
    } else if (!t->is_virtual || read_outside(t.get())) {  // leaves the partition: an output
      stored(*t, *c);
      c->set_output(true);
    }
    copy.emplace(t.get(), c);
    return c;
  };
  for (size_t i : ops) {
    ir::Node n = v.nodes()[i];
    for (auto* ports : {&n.inputs, &n.outputs})
      for (ir::Port& p : *ports) p.tensor = copy_of(p.tensor);
    copy_subgraphs(n, copy);
    g->add_node(std::move(n));
  }
  for (auto& [orig, c] : copy) {  // ragged offsets point at their copies (or nothing)
    if (!c->ragged_offset) continue;
    auto it = copy.find(orig->ragged_offset.get());
    c->ragged_offset = it == copy.end() ? nullptr : it->second;
  }
  return g;
}

// Uids 1, 2, ... in the order the cut made its tensors (the nodes' ports, then their subgraphs'
// tensors): the support question does not depend on uids, and the same ops on other tensors (the
// next layer of a model) then have the same fingerprint.
void renumber(Graph& g) {
  int64_t next = 1;
  std::unordered_map<const ir::TensorAttrs*, bool> seen;
  auto number = [&](const ir::Tensor& t) {
    if (t && seen.emplace(t.get(), true).second) t->set_uid(next++);
  };
  for (const ir::Tensor& t : g.tensors()) number(t);
  for (const ir::Node& n : g.nodes())
    for (const ir::Subgraph& sg : n.subgraphs) {
      number(sg.input);
      number(sg.output);
      for (const ir::Node& sn : sg.nodes)
        for (const auto* ports : {&sn.inputs, &sn.outputs})
          for (const ir::Port& p : *ports) number(p.tensor);
    }
}

// ---------------------------------------------------------------- the support cache

struct Answer {
  Status status;
  std::vector<std::string> names;  // the graph's, its ops' and its tensors' names when asked
};

struct SupportCache {
  static constexpr size_t kCapacity = 8192;
  std::mutex mu;
  std::unordered_map<std::string, Answer> map;
  int64_t hits = 0, misses = 0;
};
SupportCache& support_cache() {
  static SupportCache* c = new SupportCache();  // never destroyed: used until exit
  return *c;
}

std::vector<std::string> names_of(const Graph& g) {
  std::vector<std::string> out{g.name()};
  for (const ir::Node& n : g.nodes()) out.push_back(n.name);
  for (const ir::Tensor& t : g.tensors()) out.push_back(t->name);
  return out;
}

// A refusal cached for another graph of the same structure names that graph's ops and tensors:
// each quoted name becomes the one in the same place of this graph.
std::string rename(const std::string& message, const std::vector<std::string>& from,
                   const std::vector<std::string>& to) {
  std::unordered_map<std::string, std::string> map;
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) map.emplace(from[i], to[i]);
  std::string out;
  size_t pos = 0;
  while (pos < message.size()) {
    const size_t open = message.find('\'', pos);
    const size_t close = open == std::string::npos ? open : message.find('\'', open + 1);
    if (close == std::string::npos) break;
    const std::string word = message.substr(open + 1, close - open - 1);
    auto it = map.find(word);
    out += message.substr(pos, open + 1 - pos);
    out += it == map.end() ? word : it->second;
    out += '\'';
    pos = close + 1;
  }
  return out + message.substr(std::min(pos, message.size()));
}

// The device (and the GPU a deviceless handle plans for) and the engines that run there.
std::string device_key(const Handle& h) {
  std::string key = h.device().to_string();
  if (h.target()) key += "/" + h.target()->describe();
  for (Engine* e : registered_engines())
    if (e->runs_on(h.device())) key += "/" + std::string(e->name());
  return key;
}

std::string flat(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// A refusal on one line: check_support's message lists every candidate's reason on a line of its
// own (dozens on cuDNN); this keeps the distinct reasons, the first few of them.
std::string one_line(const Graph& sub, const Status& s) {
  const std::vector<CandidateStatus>& cands = sub.candidates();
  if (cands.empty() || s.message().find('\n') == std::string::npos) return flat(s.message());
  std::vector<std::string> distinct;
  for (const CandidateStatus& c : cands) {
    if (c.support.is_ok()) continue;
    std::string m = flat(c.support.message());
    if (std::find(distinct.begin(), distinct.end(), m) == distinct.end()) distinct.push_back(m);
  }
  constexpr size_t kShown = 3;
  std::string out = detail::cat("engine '", cands.front().info.engine, "': none of its ",
                                cands.size(), " candidate(s) supports it: ");
  for (size_t i = 0; i < distinct.size() && i < kShown; ++i) out += (i ? "; " : "") + distinct[i];
  if (distinct.size() > kShown)
    out += detail::cat("; and ", distinct.size() - kShown, " other reason(s)");
  return out;
}

// The cached answer for `sub` (validated here; its fingerprint is the key) under `tag`, else
// ask() and cache it when it is an answer (OK or NotSupported). ask() returns the status and the
// graph it asked (sub, or another form of it), whose candidates put a refusal on one line.
template <class Ask>
Status cached_answer(Graph& sub, const HandlePtr& h, const char* tag, Ask ask) {
  if (Status v = sub.validate(); !v.is_ok()) return Status(v.code(), flat(v.message()));
  const std::string key = device_key(*h) + tag + ir::fingerprint(sub).hex();
  SupportCache& cache = support_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    if (auto it = cache.map.find(key); it != cache.map.end()) {
      ++cache.hits;
      const Status& s = it->second.status;
      if (s.is_ok()) return s;
      return Status(s.code(), rename(s.message(), it->second.names, names_of(sub)));
    }
    ++cache.misses;
  }
  auto [s, asked] = ask();
  if (!s.is_ok()) s = Status(s.code(), one_line(*asked, s));
  if (s.is_ok() || s.code() == ErrorCode::NotSupported) {  // other errors are not answers
    std::lock_guard<std::mutex> lock(cache.mu);
    if (cache.map.size() >= SupportCache::kCapacity) cache.map.clear();
    cache.map.emplace(key, Answer{s, names_of(sub)});
  }
  return s;
}

// Whether the engine on h's device can build `sub` as one graph: the pipeline up to
// check_support.
Status engine_accepts(Graph& sub, const HandlePtr& h) {
  return cached_answer(sub, h, ":", [&] {
    Status s = sub.validate(h);
    if (s.is_ok()) s = sub.build_operation_graph(h);
    if (s.is_ok()) s = sub.create_execution_plans({HeurMode::A, HeurMode::Fallback});
    if (s.is_ok()) s = sub.check_support();
    return std::pair<Status, Graph*>{s, &sub};
  });
}

// Whether the engine builds a plan for a partition, not only accepts it at check_support (which
// reads a candidate's needs without finalizing it: a candidate can still fail to build). Asked
// of the partitions the grouping settled on, so that run_graph, which has no ATen form, finds a
// plan. The answer is cached by `keyed` (the partition with its uids renumbered); `exact` (the
// partition as partition_graph() makes it, original uids) is what is built, so that its plan
// lands in the plan cache under the key running the partition looks up.
Status engine_builds(Graph& keyed, Graph& exact, const HandlePtr& h) {
  Status s = cached_answer(keyed, h, ":built:", [&] {
    Status b = exact.validate();
    if (b.is_ok()) b = exact.build(h, {HeurMode::A, HeurMode::Fallback});
    return std::pair<Status, Graph*>{b, &exact};
  });
  if (s.is_ok() || s.code() != ErrorCode::NotSupported) return s;
  return Status(
      s.code(),
      "the engine accepted this graph at check_support but built no plan for it: " + s.message());
}

// ---------------------------------------------------------------- growing groups

using Bits = std::vector<uint64_t>;
void set_bit(Bits& b, size_t i) { b[i / 64] |= uint64_t{1} << (i % 64); }
bool has_bit(const Bits& b, size_t i) { return (b[i / 64] >> (i % 64)) & 1; }
void or_into(Bits& dst, const Bits& src) {
  for (size_t k = 0; k < dst.size(); ++k) dst[k] |= src[k];
}
// Whether a and b share a bit among the words [from, to).
bool intersects(const Bits& a, const Bits& b, size_t from, size_t to) {
  for (size_t k = from; k < to; ++k)
    if (a[k] & b[k]) return true;
  return false;
}

struct Group {
  std::vector<size_t> ops;  // ascending
  Bits members;
  bool supported = false;
  bool alive = true;  // false once merged into another group
  std::string reason;
};

class Grouper {
 public:
  Grouper(const ir::ValidatedGraph& v, const HandlePtr& h)
      : v_(v), h_(h), w_(wire(v)), n_(v.nodes().size()), words_((n_ + 63) / 64) {
    anc_.assign(n_, Bits(words_));
    for (size_t i = 0; i < n_; ++i)
      for (size_t p : w_.preds[i]) {
        or_into(anc_[i], anc_[p]);
        set_bit(anc_[i], p);
      }
    group_of_.assign(n_, SIZE_MAX);
  }

  void place(size_t i);
  // Places every op of a connected component whose ops the engine builds as one graph, as one
  // group (a component is convex); false, placing nothing, when the engine refuses it.
  bool place_component(const std::vector<size_t>& ops);
  std::vector<Partition> result() const;
  size_t size() const { return n_; }
  const std::vector<std::vector<size_t>>& preds() const { return w_.preds; }

 private:
  // Whether the ops of `u` (which holds op i, the latest) form a convex set: no op outside u lies
  // on a path between two of its ops. Such an op lies between u's first op and i (the order is
  // topological), so only that span is looked at: the cost follows the group's span, not the
  // graph's size.
  bool convex(const Bits& u, size_t i) const {
    size_t lo = 0;
    while (!has_bit(u, lo)) ++lo;
    const size_t wlo = lo / 64, whi = i / 64 + 1;
    Bits above(words_);
    for (size_t m = lo; m <= i; ++m)
      if (has_bit(u, m)) or_into(above, anc_[m]);
    for (size_t k = lo + 1; k < i; ++k)
      if (has_bit(above, k) && !has_bit(u, k) && intersects(anc_[k], u, wlo, whi)) return false;
    return true;
  }
  Status accepts(const Bits& u) const {
    std::vector<size_t> ops;
    std::vector<char> in(n_, 0);
    for (size_t m = 0; m < n_; ++m)
      if (has_bit(u, m)) ops.push_back(m), in[m] = 1;
    std::unique_ptr<Graph> sub = cut(v_, w_, ops, in, v_.name());
    renumber(*sub);
    return engine_accepts(*sub, h_);
  }
  bool try_merge(size_t i, const std::vector<size_t>& groups);

  const ir::ValidatedGraph& v_;
  const HandlePtr& h_;
  Wiring w_;
  size_t n_, words_;
  std::vector<Bits> anc_;  // per op: every op it depends on
  std::vector<size_t> group_of_;
  std::vector<Group> groups_;
};

// Merges the groups `gs` and op i into gs[0] when the union is convex and the engine builds it.
bool Grouper::try_merge(size_t i, const std::vector<size_t>& gs) {
  Bits u(words_);
  set_bit(u, i);
  for (size_t g : gs) or_into(u, groups_[g].members);
  if (!convex(u, i) || !accepts(u).is_ok()) return false;
  Group& into = groups_[gs[0]];
  for (size_t k = 1; k < gs.size(); ++k) {
    Group& from = groups_[gs[k]];
    for (size_t op : from.ops) group_of_[op] = gs[0];
    into.ops.insert(into.ops.end(), from.ops.begin(), from.ops.end());
    from.alive = false;
    from.ops.clear();
  }
  into.ops.push_back(i);
  std::sort(into.ops.begin(), into.ops.end());
  into.members = std::move(u);
  group_of_[i] = gs[0];
  return true;
}

void Grouper::place(size_t i) {
  // The supported groups whose outputs op i reads, largest first.
  std::vector<size_t> connected;
  for (size_t p : w_.preds[i]) {
    const size_t g = group_of_[p];
    if (groups_[g].supported && std::find(connected.begin(), connected.end(), g) == connected.end())
      connected.push_back(g);
  }
  std::stable_sort(connected.begin(), connected.end(), [&](size_t a, size_t b) {
    return groups_[a].ops.size() > groups_[b].ops.size();
  });
  if (connected.size() > 1 && try_merge(i, connected)) return;
  for (size_t g : connected)
    if (try_merge(i, {g})) return;
  Group alone;
  alone.ops = {i};
  alone.members = Bits(words_);
  set_bit(alone.members, i);
  Status s = accepts(alone.members);
  alone.supported = s.is_ok();
  if (!s.is_ok()) {
    alone.reason = s.message();
    if (log_enabled(LogLevel::Dispatch))
      log_message(LogLevel::Dispatch, "partition: op '" + v_.nodes()[i].name +
                                          "' stays alone, unsupported: " + alone.reason);
  }
  group_of_[i] = groups_.size();
  groups_.push_back(std::move(alone));
}

bool Grouper::place_component(const std::vector<size_t>& ops) {
  Group all;
  all.members = Bits(words_);
  for (size_t i : ops) set_bit(all.members, i);
  if (!accepts(all.members).is_ok()) return false;
  all.ops = ops;
  all.supported = true;
  for (size_t i : ops) group_of_[i] = groups_.size();
  groups_.push_back(std::move(all));
  return true;
}

// The ops connected through the tensors one makes and another reads, component by component,
// each ascending; components in the order of their first op.
std::vector<std::vector<size_t>> components(size_t n,
                                            const std::vector<std::vector<size_t>>& preds) {
  std::vector<size_t> root(n);
  for (size_t i = 0; i < n; ++i) root[i] = i;
  auto find = [&](size_t i) {
    while (root[i] != i) i = root[i] = root[root[i]];
    return i;
  };
  for (size_t i = 0; i < n; ++i)
    for (size_t p : preds[i]) root[find(i)] = find(p);
  std::vector<std::vector<size_t>> out;
  std::unordered_map<size_t, size_t> index;  // root -> component
  for (size_t i = 0; i < n; ++i) {
    auto [it, added] = index.emplace(find(i), out.size());
    if (added) out.emplace_back();
    out[it->second].push_back(i);
  }
  return out;
}

// The live groups in an order that runs them (Kahn's algorithm, the group with the earliest op
// first among those ready).
std::vector<Partition> Grouper::result() const {
  std::vector<size_t> live;
  std::unordered_map<size_t, size_t> slot;  // group -> index in live
  for (size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].alive) slot.emplace(g, live.size()), live.push_back(g);
  std::vector<std::set<size_t>> next(live.size());
  std::vector<size_t> waiting(live.size(), 0);
  for (size_t i = 0; i < n_; ++i)
    for (size_t p : w_.preds[i]) {
      const size_t a = slot.at(group_of_[p]), b = slot.at(group_of_[i]);
      if (a != b && next[a].insert(b).second) ++waiting[b];
    }
  std::set<std::pair<size_t, size_t>> ready;  // (first op, slot)
  for (size_t s = 0; s < live.size(); ++s)
    if (!waiting[s]) ready.emplace(groups_[live[s]].ops.front(), s);
  std::vector<Partition> out;
  while (!ready.empty()) {
    const size_t s = ready.begin()->second;
    ready.erase(ready.begin());
    const Group& g = groups_[live[s]];
    out.push_back(Partition{g.ops, g.supported, g.reason});
    for (size_t b : next[s])
      if (--waiting[b] == 0) ready.emplace(groups_[live[b]].ops.front(), b);
  }
  return out;
}

Status needs_validated(const Graph& g, const char* call) {
  if (g.validated()) return Status::ok();
  return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': ", call,
                    "() needs a validated graph (its op indices are those validate() sorts): "
                    "call validate() first");
}

}  // namespace

Result<std::vector<Partition>> partition(const Graph& g, const HandlePtr& h,
                                         const PartitionOptions& options) {
  if (!h)
    return make_error(ErrorCode::InvalidArgument, "graph '", g.name(),
                      "': partition() needs a handle (the engine of its device decides)");
  DNNGRAPH_TRY(needs_validated(g, "partition"));
  const ir::ValidatedGraphPtr v = g.validated();
  Grouper grouper(*v, h);
  // A component the engine builds whole is one partition, asked once: growing it op by op would
  // ask about ever larger candidates, time quadratic in its size (the reference engine takes
  // every graph). Otherwise its ops are placed one by one, in topological order.
  for (const std::vector<size_t>& ops : components(grouper.size(), grouper.preds())) {
    if (ops.size() > 1 && grouper.place_component(ops)) continue;
    for (size_t i : ops) grouper.place(i);
  }
  // A partition is claimed only once a plan is built for it. One of several ops without a plan
  // is split into its ops, each claimed alone if a plan is built for it.
  const Wiring w = wire(*v);
  // The partition's graph: renumbered (the answers' key), or as partition_graph() makes it.
  auto sub_of = [&](const std::vector<size_t>& ops, bool renumbered) {
    std::vector<char> in(v->nodes().size(), 0);
    for (size_t i : ops) in[i] = 1;
    std::unique_ptr<Graph> sub =
        cut(*v, w, ops, in, renumbered ? v->name() : g.name() + "." + v->nodes()[ops.front()].name);
    if (renumbered) renumber(*sub);
    return sub;
  };
  auto builds = [&](const std::vector<size_t>& ops) {
    return engine_builds(*sub_of(ops, true), *sub_of(ops, false), h);
  };
  const std::vector<size_t> no_anchors;
  const std::vector<size_t>& anchors = options.anchors ? *options.anchors : no_anchors;
  for (size_t a : anchors)
    if (a >= v->nodes().size())
      return make_error(ErrorCode::InvalidArgument, "graph '", g.name(),
                        "': partition(): anchor op index ", a, " is out of range (the graph has ",
                        v->nodes().size(), " ops)");
  auto anchored = [&](const std::vector<size_t>& ops) {
    return !options.anchors || std::any_of(ops.begin(), ops.end(), [&](size_t i) {
      return std::find(anchors.begin(), anchors.end(), i) != anchors.end();
    });
  };
  std::vector<Partition> parts;
  for (Partition& p : grouper.result()) {
    if (p.supported && !anchored(p.ops)) {
      p.reason = "not built: it holds none of the anchor ops asked for";
      parts.push_back(std::move(p));
      continue;
    }
    Status s = p.supported ? builds(p.ops) : Status::ok();
    if (s.is_ok() || s.code() != ErrorCode::NotSupported) {
      if (!s.is_ok()) return s;
      p.built = p.supported;
      parts.push_back(std::move(p));
      continue;
    }
    if (p.ops.size() == 1) {
      parts.push_back(Partition{p.ops, false, s.message()});
      continue;
    }
    for (size_t i : p.ops) {  // ascending: an order that runs them
      // Alone, the op is asked at check_support first (the grouping asked about the group).
      Status one = engine_accepts(*sub_of({i}, true), h);
      if (one.is_ok()) one = builds({i});
      if (!one.is_ok() && one.code() != ErrorCode::NotSupported) return one;
      parts.push_back(Partition{{i}, one.is_ok(), one.is_ok() ? "" : one.message(), one.is_ok()});
    }
  }
  return parts;
}

Result<std::unique_ptr<Graph>> partition_graph(const Graph& g, const Partition& p) {
  DNNGRAPH_TRY(needs_validated(g, "partition_graph"));
  const ir::ValidatedGraphPtr v = g.validated();
  const size_t n = v->nodes().size();
  std::vector<size_t> ops = p.ops;
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  if (ops.empty())
    return make_error(ErrorCode::InvalidArgument, "graph '", g.name(),
                      "': partition_graph() got a partition without ops");
  std::vector<char> in(n, 0);
  for (size_t i : ops) {
    if (i >= n)
      return make_error(ErrorCode::InvalidArgument, "graph '", g.name(),
                        "': partition_graph(): op index ", i, " is out of range (the graph has ", n,
                        " ops)");
    in[i] = 1;
  }
  // Named after the graph and the partition's first op.
  auto sub = cut(*v, wire(*v), ops, in, g.name() + "." + v->nodes()[ops.front()].name);
  if (Status s = sub->validate(); !s.is_ok())
    return make_error(s.code(), "graph '", g.name(),
                      "': partition_graph(): the ops do not form "
                      "a standalone graph: ",
                      s.message());
  return sub;
}

std::vector<int64_t> partition_cache_stats() {
  SupportCache& c = support_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {static_cast<int64_t>(c.map.size()), c.hits, c.misses};
}

void clear_partition_cache() {
  SupportCache& c = support_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.map.clear();
  c.hits = c.misses = 0;
}

}  // namespace dnngraph
