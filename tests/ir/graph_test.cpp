// Graph-level validation: wiring, topological order, uids, rollback on failure, queries.
#include <gtest/gtest.h>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

Node pointwise_node(const std::string& name, PointwiseMode m, std::vector<Tensor> in, Tensor out) {
  Node n;
  n.name = name;
  PointwiseAttrs a;
  a.mode = m;
  n.attrs = a;
  const Role roles[] = {Role::IN_0, Role::IN_1, Role::IN_2};
  for (size_t i = 0; i < in.size(); ++i) n.inputs.push_back({roles[i], in[i]});
  n.outputs.push_back({Role::OUT_0, out});
  return n;
}

Tensor virtual_tensor(const std::string& name) {
  auto t = std::make_shared<TensorAttrs>();
  t->set_name(name).set_is_virtual(true);
  return t;
}

TEST(GraphValidate, SortsNodesTopologicallyKeepingInsertionOrderOtherwise) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor x = make_input(g, "x", {2, 3}, DataType::Float);
  Tensor a = virtual_tensor("a"), b = virtual_tensor("b");
  Tensor c = virtual_tensor("c"), d = virtual_tensor("d");
  // Added consumers first: "use_b" needs "make_b", which needs "make_a".
  g.add_node(pointwise_node("use_b", PointwiseMode::Exp, {b}, c));
  g.add_node(pointwise_node("make_b", PointwiseMode::Relu, {a}, b));
  g.add_node(pointwise_node("indep", PointwiseMode::Neg, {x}, d));
  g.add_node(pointwise_node("make_a", PointwiseMode::Abs, {x}, a));
  c->set_output(true);
  d->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  std::vector<std::string> names;
  for (const Node& n : g.nodes()) names.push_back(n.name);
  // "indep" (index 2) is ready at once and comes before "make_a" (index 3).
  EXPECT_EQ(names, (std::vector<std::string>{"indep", "make_a", "make_b", "use_b"}));
}

TEST(GraphValidate, AssignsUidsAfterTheLargestUserUidInTensorOrder) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor a = make_input(g, "A", {4, 8});
  Tensor b = make_input(g, "B", {8, 5});
  b->set_uid(10);
  Tensor c = g.matmul(a, b);
  c->set_output(true);
  Tensor r = g.relu(c);
  r->set_output(true).set_uid(3);
  ASSERT_TRUE(g.validate().is_ok());
  // tensors_ order: A, B, C (matmul output), relu output.
  EXPECT_EQ(a->uid, 11);
  EXPECT_EQ(b->uid, 10);
  EXPECT_EQ(c->uid, 12);
  EXPECT_EQ(r->uid, 3);
  EXPECT_EQ(g.find_tensor_by_uid(12), c);
  EXPECT_EQ(g.find_tensor_by_uid(99), nullptr);
  EXPECT_EQ(g.find_tensor_by_name("B"), b);
  EXPECT_EQ(g.find_tensor_by_name("nope"), nullptr);
  auto io = g.io_tensors();
  ASSERT_EQ(io.size(), 4u);
  EXPECT_EQ(io[0], r);  // uid 3
  EXPECT_EQ(io[1], b);  // uid 10
  EXPECT_EQ(io[2], a);  // uid 11
  EXPECT_EQ(io[3], c);  // uid 12
}

TEST(GraphValidate, IsIdempotent) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  Tensor x = make_input(g, "x", {2, 4, 6}, DataType::NotSet);
  Tensor y = g.relu(x);
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  const std::string first = g.to_table();
  const TensorAttrs y1 = *y;
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(g.to_table(), first);
  EXPECT_EQ(y->dim, y1.dim);
  EXPECT_EQ(y->uid, y1.uid);
  EXPECT_EQ(x->data_type, DataType::BFloat16);  // NotSet input took the io type
  EXPECT_EQ(y->data_type, DataType::BFloat16);  // non-virtual output: io type
  EXPECT_EQ(x->stride, (std::vector<int64_t>{24, 6, 1}));
}

TEST(GraphValidate, FailureLeavesTheGraphUnchanged) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor a = make_input(g, "A", {4, 8});
  Tensor b = make_input(g, "B", {7, 5});
  Tensor ok = g.relu(a, {"relu_first"});
  ok->set_output(true);
  Tensor c = g.matmul(a, b, {}, {"mm"});
  c->set_output(true);
  expect_invalid(g, {"mm", "'A'", "'B'"});
  EXPECT_TRUE(ok->dim.empty());  // the relu's inference was rolled back
  EXPECT_FALSE(a->uid_assigned);
  EXPECT_EQ(ok->data_type, DataType::NotSet);
  // Fixing the problem makes it valid.
  b->set_dim({8, 5});
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(c->dim, (std::vector<int64_t>{4, 5}));
}

TEST(GraphValidate, DuplicateUid) {
  Graph g;
  Tensor a = make_input(g, "A", {2, 2});
  Tensor b = make_input(g, "B", {2, 2});
  a->set_uid(7);
  b->set_uid(7);
  g.add(a, b, {"sum"})->set_output(true);
  expect_invalid(g, {"duplicate uid 7", "'A'", "'B'"});
}

// relu(x [2, 2]) as the output: a valid graph, to which a test adds a tensor.
void relu_of_x(Graph& g) { g.relu(make_input(g, "x", {2, 2}))->set_output(true); }

TEST(GraphValidate, OutputNeverProduced) {
  Graph g;
  relu_of_x(g);
  g.tensor(TensorAttrs()
               .set_name("lonely_out")
               .set_dim({2, 2})
               .set_data_type(DataType::Half)
               .set_output(true));
  expect_invalid(g, {"output never produced", "'lonely_out'"});
}

TEST(GraphValidate, UnusedNonVirtualTensor) {
  Graph g;
  relu_of_x(g);
  make_input(g, "forgotten", {2, 2});
  expect_invalid(g, {"'forgotten'", "neither produced nor read"});
}

TEST(GraphValidate, VirtualInputWithoutProducer) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 2});
  x->set_is_virtual(true);
  g.relu(x, {"act"})->set_output(true);
  expect_invalid(g, {"pointwise 'act'", "'x'", "no op produces it"});
}

TEST(GraphValidate, UnusedVirtualTensorWithoutProducer) {
  Graph g;
  relu_of_x(g);
  g.tensor(TensorAttrs().set_name("dangling").set_dim({2, 2}).set_is_virtual(true));
  expect_invalid(g, {"virtual tensor 'dangling'", "not produced"});
}

TEST(GraphValidate, CycleNamesItsOps) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 2});
  Tensor a = virtual_tensor("ta"), b = virtual_tensor("tb"), out = virtual_tensor("out");
  g.add_node(pointwise_node("opA", PointwiseMode::Add, {x, b}, a));
  g.add_node(pointwise_node("opB", PointwiseMode::Exp, {a}, b));
  g.add_node(pointwise_node("opC", PointwiseMode::Neg, {b}, out));
  out->set_output(true);
  Status s = g.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("cycle"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pointwise 'opA' --'ta'--> pointwise 'opB'"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("pointwise 'opB' --'tb'--> pointwise 'opA'"), std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("opC"), std::string::npos) << s.message();
}

TEST(GraphValidate, SelfLoopIsACycle) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 2});
  Tensor a = virtual_tensor("loop");
  g.add_node(pointwise_node("self", PointwiseMode::Add, {x, a}, a));
  a->set_output(true);
  expect_invalid(g, {"cycle", "'self'", "'loop'"});
}

TEST(GraphValidate, TensorProducedTwice) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 2});
  Tensor y = virtual_tensor("y");
  g.add_node(pointwise_node("first", PointwiseMode::Relu, {x}, y));
  g.add_node(pointwise_node("second", PointwiseMode::Exp, {x}, y));
  y->set_output(true);
  expect_invalid(g, {"produced twice", "'y'", "'first'", "'second'"});
}

TEST(GraphValidate, PassByValueMustBeOneElement) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 2});
  TensorAttrs s;
  s.set_name("alpha").set_dim({2}).set_data_type(DataType::Float).set_is_pass_by_value(true);
  Tensor alpha = g.tensor(s);
  g.mul(x, alpha, {"scale_it"})->set_output(true);
  expect_invalid(g, {"pass-by-value", "'alpha'", "'scale_it'", "[2]"});
}

TEST(GraphValidate, PassByValueMustNotBeVirtual) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 2});
  Tensor alpha = g.scalar(Scalar::of_float(0.5), "alpha");
  alpha->set_is_virtual(true);
  g.mul(x, alpha, {"scale_it"})->set_output(true);
  expect_invalid(g, {"pass-by-value", "'alpha'", "non-virtual"});
}

TEST(GraphValidate, InputWithoutDims) {
  Graph g;
  TensorAttrs a;
  a.set_name("shapeless").set_data_type(DataType::Float);
  Tensor x = g.tensor(a);
  g.relu(x, {"act"})->set_output(true);
  expect_invalid(g, {"'shapeless'", "'act'", "no dims"});
}

TEST(GraphValidate, ZeroDimAndBadStrides) {
  {
    Graph g;
    Tensor x = make_input(g, "x", {2, 0});
    g.relu(x, {"act"})->set_output(true);
    expect_invalid(g, {"'x'", "'act'", "must be >= 1"});
  }
  {
    Graph g;
    Tensor x = make_input(g, "x", {2, 3}, DataType::Half, {3, 1, 1});
    g.relu(x, {"act"})->set_output(true);
    expect_invalid(g, {"'x'", "'act'", "3 strides"});
  }
  {
    Graph g;
    Tensor x = make_input(g, "x", {2, 3}, DataType::Half);
    Tensor y = g.relu(x, {"act"});
    y->set_output(true).set_stride({0, 1});
    expect_invalid(g, {"'act::OUT_0'", "'act'", "stride 0 is 0"});
  }
}

TEST(GraphValidate, MissingDataType) {
  Graph g;  // no io data type
  Tensor x = make_input(g, "untyped", {2, 2}, DataType::NotSet);
  g.relu(x, {"act"})->set_output(true);
  expect_invalid(g, {"'untyped'", "'act'", "no data type"});
}

TEST(GraphValidate, DataTypeDefaults) {
  Graph g;
  g.set_io_data_type(DataType::Half).set_intermediate_data_type(DataType::Float);
  Tensor x = make_input(g, "x", {2, 2}, DataType::BFloat16);
  Tensor mid = g.relu(x);
  Tensor out = g.gelu(mid, {"g", DataType::Double});
  out->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(mid->data_type, DataType::Float);                   // virtual: intermediate type
  EXPECT_EQ(out->data_type, DataType::Half);                    // output: io type
  EXPECT_EQ(g.nodes()[0].compute_data_type, DataType::Float);   // graph's compute type
  EXPECT_EQ(g.nodes()[1].compute_data_type, DataType::Double);  // node's own
}

TEST(GraphValidate, OutputTypeFallsBackToInputTypeWithoutIoType) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 2}, DataType::BFloat16);
  Tensor out = g.relu(x);
  out->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(out->data_type, DataType::BFloat16);
}

TEST(GraphValidate, UnknownPortRole) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 2});
  Tensor y = virtual_tensor("y");
  Node n = pointwise_node("typo", PointwiseMode::Relu, {x}, y);
  n.inputs[0].role = Role::X;  // a port of other families, not of pointwise
  g.add_node(n);
  y->set_output(true);
  expect_invalid(g, {"pointwise 'typo'", "unknown input port 'X'", "'x'"});
}

TEST(GraphValidate, ToTableListsNodesAndTensors) {
  Graph g;
  g.set_name("demo").set_io_data_type(DataType::Half);
  Tensor a = make_input(g, "A", {4, 8});
  Tensor b = make_input(g, "B", {8, 5});
  Tensor alpha = g.scalar(Scalar::of_float(0.5), "alpha");
  Tensor c = g.matmul(a, b, {}, {"mm"});
  g.mul(c, alpha, {"scaled"})->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  const std::string t = g.to_table();
  for (const char* s :
       {"graph 'demo'", "2 nodes", "validated", "matmul", "mm", "A='A'", "C='mm::C'", "[4,8]",
        "[8,1]", "HALF", "virtual", "output", "by_value=0.5", "MUL", "scaled::OUT_0"})
    EXPECT_NE(t.find(s), std::string::npos) << "table lacks " << s << "\n" << t;
  EXPECT_EQ(t, g.to_table());
}

}  // namespace
}  // namespace dnngraph::ir
