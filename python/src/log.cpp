// dnngraph's log lines (DNNGRAPH_LOG, include/dnngraph/log.hpp) routed to Python's `logging`,
// logger "dnngraph": error -> ERROR, warn -> WARNING, info -> INFO, debug -> DEBUG,
// dispatch -> 5 (below DEBUG).
#include "dnngraph/log.hpp"
#include "common.hpp"

namespace dnngraph::py {

namespace {

int python_level(LogLevel l) {
  switch (l) {
    case LogLevel::Error:
      return 40;
    case LogLevel::Warn:
      return 30;
    case LogLevel::Info:
      return 20;
    case LogLevel::Debug:
      return 10;
    default:
      return 5;
  }
}

void to_python(LogLevel l, std::string_view message) {
  if (!Py_IsInitialized()) return;
  nb::gil_scoped_acquire gil;  // logged from threads that released the GIL (build, execute)
  try {
    nb::module_::import_("logging")
        .attr("getLogger")("dnngraph")
        .attr("log")(python_level(l), "%s", printable(std::string(message)));
  } catch (nb::python_error& e) {
    e.discard_as_unraisable("dnngraph logging");
  }
}

LogLevel parse(const std::string& name) {
  for (LogLevel l : {LogLevel::Off, LogLevel::Error, LogLevel::Warn, LogLevel::Info,
                     LogLevel::Debug, LogLevel::Dispatch})
    if (name == log_level_name(l)) return l;
  throw nb::value_error(("set_log_level: unknown level '" + name +
                         "'; expected off, error, warn, info, debug or dispatch")
                            .c_str());
}

}  // namespace

void bind_log(nb::module_& m) {
  m.def(
      "set_log_level", [](const std::string& level) { set_log_level(parse(level)); },
      nb::arg("level"),
      "Sets the log level (off, error, warn, info, debug, dispatch), as DNNGRAPH_LOG does.");
  m.def(
      "get_log_level", [] { return std::string(log_level_name(log_level())); },
      "The log level in force (DNNGRAPH_LOG, or the last set_log_level).");
  m.def(
      "_route_logs_to_python", [](bool on) { set_log_sink(on ? LogSink(to_python) : LogSink()); },
      nb::arg("on"),
      "On: log lines go to logging.getLogger('dnngraph') instead of stderr/DNNGRAPH_LOG_FILE.");
}

}  // namespace dnngraph::py
