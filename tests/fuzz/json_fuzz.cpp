// libFuzzer target for the JSON loader (and what runs on what it loads).
//
// Whatever the bytes, from_json must return a Status without crashing. When it accepts them,
// the description must round-trip exactly (to_json(from_json(to_json(g))) == to_json(g), same
// fingerprint), and validate(), to_table(), to_dot() and fingerprint() must not crash either.
// A broken invariant aborts, so libFuzzer records the input as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dnngraph/ir/dot.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"

namespace {

void check(bool ok, const char* what, const std::string& detail = {}) {
  if (ok) return;
  std::fprintf(stderr, "json_fuzz: invariant broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dnngraph::ir;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Graph g;
  dnngraph::Status s = from_json(text, g);
  if (!s.is_ok()) {
    check(s.message().find('\n') == std::string::npos, "error message is one line", s.message());
    return 0;
  }

  const std::string once = to_json(g);
  Graph again;
  s = from_json(once, again);
  check(s.is_ok(), "to_json output loads", s.message() + "\n" + once);
  check(to_json(again) == once, "to_json round trip is exact", once);
  const FingerprintOptions all{true, true};
  check(fingerprint(again, all) == fingerprint(g, all), "fingerprint survives the round trip");
  (void)fingerprint(g, {false, false});
  (void)to_dot(g);
  (void)to_json(g, -1);

  if (g.validate().is_ok()) {
    (void)g.to_table();
    (void)to_json(g);
    (void)fingerprint(g);
    (void)to_dot(g);
  }
  return 0;
}
