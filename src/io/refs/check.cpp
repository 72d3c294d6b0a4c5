// The reference-case checker: validates a flaxpp.refs/1 document, runs each case through the
// problem registry and compares with the expected value.
#include <new>
#include <ostream>
#include <set>

#include "flaxpp/io/refs.hpp"

namespace flaxpp::refs {
namespace {

Tolerance read_tolerance(const Json& c, const std::string& path) {
  Tolerance tol;
  const Inputs fields(c, path);
  auto non_negative = [&](std::string_view key, double fallback) {
    const double v = fields.number(key, fallback);
    if (!(v >= 0))
      throw InputError(detail::str(path, ".", key, ": expected a number >= 0, got ", v));
    return v;
  };
  tol.rtol = non_negative("rtol", tol.rtol);
  tol.atol = non_negative("atol", tol.atol);
  if (fields.has("ulp")) tol.ulp = non_negative("ulp", 0);
  return tol;
}

CaseResult run_case(const Json& c, const std::string& path, std::set<std::string>& ids,
                    CaseContext context, const ProblemRegistry& registry,
                    std::chrono::milliseconds timeout) {
  CaseResult result;
  result.id = path;  // until the case names itself
  if (timeout.count() > 0) context.deadline = std::chrono::steady_clock::now() + timeout;
  try {
    if (!c.is_object())
      throw InputError(detail::str(path, ": expected a case object, got ", io::describe_json(c)));
    const Inputs fields(c, path);
    result.id = fields.string("id");
    if (!ids.insert(result.id).second)
      throw InputError(
          detail::str(path, ".id: \"", result.id, "\" repeats the id of an earlier case"));
    const std::string name = fields.string("problem");
    const Problem* problem = registry.find(name);
    if (problem == nullptr) {
      std::string known;
      for (const auto& n : registry.names())
        known += detail::str(known.empty() ? "" : ", ", n);
      throw InputError(detail::str(path, ".problem: unknown problem \"", name,
                                   "\"; this flaxpp implements: ", known));
    }
    const Tolerance tolerance = read_tolerance(c, path);
    const Json& expected = fields.raw("expected");
    const Outcome got = (*problem)(fields.object("inputs"), context);
    std::optional<std::string> mismatch;
    if (const Tree* tree = std::get_if<Tree>(&got)) {
      mismatch = compare(*tree, io::tree_from_json(expected, path + ".expected"), tolerance);
    } else {
      mismatch = compare_records(std::get<Records>(got), expected, path + ".expected");
    }
    if (mismatch) throw ValueError(*mismatch);
    result.passed = true;
  } catch (const CaseTimeout&) {
    result.message = detail::str(path, ": stopped after the time limit of ",
                                 std::chrono::duration<double>(timeout).count(),
                                 " s per case; is the case meant to be this large? (raise the "
                                 "limit with flaxpp check --case-timeout SECONDS, 0 for none)");
  } catch (const std::bad_alloc&) {
    result.message = detail::str(path,
                                 ": ran out of host memory (std::bad_alloc); are the input "
                                 "shapes meant to be this large?");
  } catch (const Error& e) {
    result.message = e.what();
  } catch (const std::exception& e) {
    result.internal_error = true;
    result.message = detail::str(path, ": internal error (", e.what(),
                                 "); this is a bug in flaxpp: please report it with this case");
  }
  return result;
}

}  // namespace

FileResult check_document(const Json& document, const std::string& name, Device device,
                          const ProblemRegistry& registry, const CheckOptions& options) {
  FileResult result;
  result.file = name;
  auto file_error = [&](const std::string& msg) {
    result.error = detail::str(name, ": ", msg);
    return result;
  };
  if (!document.is_object())
    return file_error(detail::str("$: expected an object with \"format\" and \"cases\", got ",
                                  io::describe_json(document)));
  if (!document.contains("format"))
    return file_error(detail::str("$.format: missing; expected \"", kFormat, "\""));
  if (const Json& f = document["format"]; !f.is_string() || f.get<std::string>() != kFormat)
    return file_error(
        detail::str("$.format: expected \"", kFormat, "\", got ", io::describe_json(f)));
  if (!document.contains("cases") || !document["cases"].is_array())
    return file_error(
        detail::str("$.cases: expected a list of cases, got ",
                    document.contains("cases") ? io::describe_json(document["cases"]) : "nothing"));
  CaseContext context;
  context.device = device;
  if (document.contains("versions")) {
    const Json& v = document["versions"];
    if (!v.is_object())
      return file_error(detail::str("$.versions: expected an object, got ", io::describe_json(v)));
    if (v.contains("jax_threefry_partitionable")) {
      const Json& p = v["jax_threefry_partitionable"];
      if (!p.is_boolean())
        return file_error(
            detail::str("$.versions.jax_threefry_partitionable: expected true or false, got ",
                        io::describe_json(p)));
      context.mode =
          p.get<bool>() ? random::ThreefryMode::partitionable : random::ThreefryMode::legacy;
    }
  }
  std::set<std::string> ids;
  const Json& cases = document["cases"];
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string path = detail::str("$.cases[", i, "]");
    if (options.on_case_start) options.on_case_start(detail::str(name, ": ", path));
    result.cases.push_back(run_case(cases[i], path, ids, context, registry, options.case_timeout));
    if (options.on_case_done) options.on_case_done(result.cases.back());
  }
  return result;
}

FileResult check_file(const std::string& filename, Device device, const ProblemRegistry& registry,
                      const CheckOptions& options) {
  Json document;
  try {
    document = io::read_json_file(filename);
  } catch (const std::exception& e) {
    FileResult result;
    result.file = filename;
    result.error = e.what();
    return result;
  }
  return check_document(document, filename, device, registry, options);
}

CheckSummary check_files(const std::vector<std::string>& filenames, Device device, bool verbose,
                         std::ostream& out, const CheckOptions& options,
                         const ProblemRegistry& registry) {
  CheckSummary summary;
  for (const std::string& filename : filenames) {
    CheckOptions printing = options;
    printing.on_case_done = [&](const CaseResult& c) {
      if (options.on_case_done) options.on_case_done(c);
      if (c.passed) {
        ++summary.passed;
        if (verbose) out << "ok    " << c.id << "\n";
      } else {
        ++summary.failed;
        out << "FAIL  " << c.id << "  (" << filename << ")\n      " << c.message << "\n";
      }
      out.flush();
    };
    const FileResult file = check_file(filename, device, registry, printing);
    if (file.error) {
      summary.file_errors = true;
      out << "error: " << *file.error << "\n";
    }
  }
  out << summary.passed << " passed, " << summary.failed << " failed\n";
  return summary;
}

}  // namespace flaxpp::refs
