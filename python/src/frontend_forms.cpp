// pygraph._frontend_call_forms: the cuDNN frontend's call forms, one entry per frontend method,
// filled by the op bindings (ops_*.cpp) as they define the native methods.
#include "common.hpp"

namespace dnngraph::py {

void frontend_form(nb::class_<PyGraph>& cls, const char* fe_name, const char* native,
                   std::initializer_list<const char*> positional, Renames renames, nb::dict fixed) {
  if (!nb::hasattr(cls, "_frontend_call_forms"))
    nb::setattr(cls, "_frontend_call_forms", nb::dict());
  nb::list pos;
  for (const char* p : positional) pos.append(p);
  nb::dict ren;
  for (const auto& [from, to] : renames) ren[from] = to;
  nb::dict forms = nb::borrow<nb::dict>(nb::getattr(cls, "_frontend_call_forms"));
  forms[fe_name] = nb::make_tuple(native, nb::tuple(pos), ren, fixed);
}

}  // namespace dnngraph::py
