// Handles (device + stream), backend versions and the kernel cache object.
#include <cstdlib>

#include "common.hpp"
#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/system.hpp"
#include "dnngraph/version.hpp"

namespace dnngraph::py {

const HandlePtr& PyHandle::get() const {
  if (!handle) throw nb::value_error("this handle was destroyed (destroy_handle)");
  return handle;
}

namespace {

// "cpu", "cuda", "cuda:N" (also what str() gives for a torch.device).
Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5) {
    char* end = nullptr;
    long i = std::strtol(s.c_str() + 5, &end, 10);
    if (*end == '\0' && i >= 0 && i < 1 << 16) return Device::cuda(static_cast<int>(i));
  }
  throw nb::value_error(
      ("create_handle: unknown device '" + s + "': expected 'cpu', 'cuda' or 'cuda:N'").c_str());
}

}  // namespace

HandlePtr create_handle_or_explain(Device d, const std::string& prefix, const char* hint) {
  auto h = Handle::create(d);
  if (h.is_ok()) return std::move(h).value();
  if (d.kind == Device::Kind::CUDA && h.status().code() == ErrorCode::NotSupported) {
    const std::string why = system_info().gpu_error;  // the reason without the C++ hint
    if (!why.empty()) throw_if_error(make_error(ErrorCode::NotSupported, prefix, why, "; ", hint));
  }
  throw_if_error(h.status());
  return nullptr;  // not reached: h failed
}

void bind_handle(nb::module_& m) {
  nb::class_<PyHandle>(m, "Handle", "Binds graphs to a device (cpu or one GPU) and a stream")
      .def_prop_ro(
          "device", [](const PyHandle& h) { return h.get()->device().to_string(); },
          "'cpu' or 'cuda:N'")
      .def("__repr__", [](const PyHandle& h) {
        return h.handle ? "<dnngraph.Handle " + h.handle->device().to_string() + ">"
                        : std::string("<dnngraph.Handle (destroyed)>");
      });

  m.def(
      "create_handle",
      [](nb::handle device) {
        // Accept any object whose str() names a device (e.g. torch.device("cuda:1")).
        std::string name = nb::cast<std::string>(nb::str(device));
        Device d = parse_device(name);
        auto h = std::make_shared<PyHandle>();
        h->handle =
            create_handle_or_explain(d, "create_handle: cannot use " + d.to_string() + ": ",
                                     "use create_handle(device=\"cpu\") for the reference engine");
        return h;
      },
      nb::arg("device") = "cuda",
      "A handle on `device`: 'cuda' (the default), 'cuda:N' or 'cpu' (the reference engine).\n"
      "Raises RuntimeError with the reason when the device cannot be used.");
  m.def(
      "destroy_handle", [](PyHandle& h) { h.handle.reset(); }, nb::arg("handle"),
      "Drops this handle. Graphs that were built with it keep it alive until they go away.");
  m.def(
      "set_stream",
      [](PyHandle& h, uintptr_t stream) { h.get()->set_stream(reinterpret_cast<void*>(stream)); },
      nb::arg("handle"), nb::arg("stream"),
      "Sets the CUDA stream (an int, e.g. torch.cuda.Stream().cuda_stream) used by execute.");
  m.def(
      "get_stream",
      [](const PyHandle& h) { return reinterpret_cast<uintptr_t>(h.get()->stream()); },
      nb::arg("handle"), "The handle's CUDA stream as an int (0: the default stream).");

  m.def(
      "backend_version", []() { return backend_version(); },
      "The loaded cuDNN's version as an int (e.g. 91900), 0 when cuDNN is not available.");
  m.def(
      "backend_version_string", []() { return backend_version_string(); },
      "The loaded cuDNN's version ('9.19.0'), or why cuDNN is not available.");
  m.def(
      "version", []() { return std::string(version()); }, "dnngraph's version");

  nb::class_<KernelCache>(
      m, "KernelCache",
      "cuDNN's kernel cache, shared by the graphs given it with pygraph(kernel_cache=..., "
      "is_dynamic_shape_enabled=True): a new shape reuses the kernels an earlier one compiled. "
      "Thread-safe; serialize()/save() keep it for a new process.")
      .def(
          "serialize",
          [](const KernelCache& kc) {
            auto b = kc.serialize();
            throw_if_error(b.status());
            return nb::bytes(b->data(), b->size());
          },
          "The cache as bytes (a checked header, then cuDNN's JSON); from_bytes() restores it.")
      .def(
          "save",
          [](const KernelCache& kc, const std::string& path) { throw_if_error(kc.save(path)); },
          nb::arg("path"), "Writes serialize() to a file (atomically).")
      .def(
          "deserialize",
          [](KernelCache& kc, nb::bytes b) {
            throw_if_error(
                kc.deserialize(std::string_view(static_cast<const char*>(b.data()), b.size())));
          },
          nb::arg("data"),
          "Fills this cache in place from the bytes of serialize() (checked as from_bytes() "
          "checks them), or from a str of cuDNN's own kernel cache JSON (what the cuDNN "
          "frontend's serialize() returns). ValueError when the data is neither, is damaged, or "
          "the cache already holds kernels (built with, or deserialized before): deserialize "
          "into a new cache.")
      .def(
          "deserialize",
          [](KernelCache& kc, const std::string& json) {
            // The frontend's form: cuDNN's JSON as a str; cuDNN itself accepts anything there,
            // so at least check that it is JSON.
            try {
              nb::module_::import_("json").attr("loads")(nb::str(json.data(), json.size()));
            } catch (nb::python_error& e) {
              throw nb::value_error(
                  ("KernelCache.deserialize(): the str is not JSON (" +
                   std::string(nb::str(e.value()).c_str()) +
                   "); pass the str of cuDNN's kernel cache JSON that the cuDNN frontend's "
                   "serialize() returned, or the bytes of this class's serialize() as bytes")
                      .c_str());
            }
            throw_if_error(kc.deserialize_engine_bytes("cudnn", json));
          },
          nb::arg("data"))
      .def_prop_ro("in_use", &KernelCache::in_use,
                   "True once a dynamic-shape graph was built with the cache.")
      .def_static(
          "from_bytes",
          [](nb::bytes b) {
            return unwrap(KernelCache::from_bytes(
                std::string_view(static_cast<const char*>(b.data()), b.size())));
          },
          nb::arg("data"),
          "A cache that starts from the bytes of serialize(); ValueError when they are not "
          "such bytes or are damaged (checksum).")
      .def_static(
          "load", [](const std::string& path) { return unwrap(KernelCache::load(path)); },
          nb::arg("path"), "A cache that starts from a file written by save().")
      .def("__repr__", [](const KernelCache& kc) {
        return std::string("<dnngraph.KernelCache ") + (kc.in_use() ? "in use>" : "unused>");
      });
  m.def(
      "create_kernel_cache", []() { return KernelCache::create(); },
      "A kernel cache to share between dynamic-shape graphs.");
}

}  // namespace dnngraph::py
