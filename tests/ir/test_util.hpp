// Helpers shared by the IR tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/graph.hpp"
#include "dnngraph/ir/json.hpp"

namespace dnngraph::ir::testing {

// Options that only name the node: g.conv_fprop(x, w, a, named("conv0")).
inline OpOptions named(const char* name) {
  OpOptions o;
  o.name = name;
  return o;
}

inline Tensor make_input(Graph& g, const std::string& name, std::vector<int64_t> dims,
                         DataType t = DataType::Half, std::vector<int64_t> strides = {}) {
  TensorAttrs a;
  a.set_name(name).set_dim(std::move(dims)).set_data_type(t);
  if (!strides.empty()) a.set_stride(std::move(strides));
  return g.tensor(a);
}

// Validation must fail with InvalidGraph and a message naming every string in `parts`.
inline void expect_invalid(Graph& g, const std::vector<std::string>& parts,
                           ErrorCode code = ErrorCode::InvalidGraph) {
  Status s = g.validate();
  ASSERT_FALSE(s.is_ok()) << "validate() unexpectedly succeeded\n" << g.to_table();
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const auto& p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos)
        << "message lacks \"" << p << "\": " << s.message();
  EXPECT_FALSE(g.is_validated());
}

// Validation must succeed (fatal otherwise, showing why); then t has the inferred dims, strides
// and data type.
inline void expect_inferred(Graph& g, const Tensor& t, const std::vector<int64_t>& dims,
                            const std::vector<int64_t>& strides, DataType type) {
  Status s = g.validate();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(t->dim, dims);
  EXPECT_EQ(t->stride, strides);
  EXPECT_EQ(t->data_type, type);
}

// Writes `g` as JSON and reads it back into `loaded`: the same text and fingerprint (tensor
// names included) both ways.
inline void expect_json_round_trip(const Graph& g, Graph& loaded) {
  const std::string text = to_json(g);
  Status s = from_json(text, loaded);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(to_json(loaded), text);
  EXPECT_EQ(fingerprint(loaded, {true, true}), fingerprint(g, {true, true}));
}

}  // namespace dnngraph::ir::testing
