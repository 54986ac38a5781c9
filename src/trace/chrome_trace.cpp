#include "trace/chrome_trace.hpp"

#include "core/log.hpp"

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <system_error>

namespace loom::detail {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

std::string chrome_trace_json(const std::vector<TraceTrack>& tracks,
                              const std::vector<TraceEvent>& events) {
  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  const auto sep = [&] {
    if (!first) json += ",\n";
    first = false;
  };
  sep();
  json += R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"loom"}})";
  for (const auto& t : tracks) {
    sep();
    json += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(t.id) +
            ",\"args\":{\"name\":\"" + escape(t.name) + "\"}}";
  }
  char number[64];
  for (const auto& e : events) {
    sep();
    json += "{\"name\":\"" + escape(e.name) + "\",\"cat\":\"" + escape(e.category) +
            "\",\"ph\":\"X\",\"pid\":1,\"tid\":" + std::to_string(e.track);
    std::snprintf(number, sizeof number, ",\"ts\":%.3f,\"dur\":%.3f", e.start_us,
                  e.duration_us < 0 ? 0.0 : e.duration_us);
    json += number;
    if (e.run != 0) json += ",\"args\":{\"run\":" + std::to_string(e.run) + "}";
    json += "}";
  }
  json += "\n]}\n";
  return json;
}

bool try_write_chrome_trace(const std::string& path, const std::vector<TraceTrack>& tracks,
                            const std::vector<TraceEvent>& events, std::string& why) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) {
    why = "cannot open '" + path +
          "' for writing: " + std::error_code(errno, std::generic_category()).message();
    return false;
  }
  out << chrome_trace_json(tracks, events);
  out.close();
  if (!out) {
    why = "writing '" + path + "' failed";
    return false;
  }
  return true;
}

void write_chrome_trace(const std::string& path, const std::vector<TraceTrack>& tracks,
                        const std::vector<TraceEvent>& events) {
  std::string why;
  if (!try_write_chrome_trace(path, tracks, events, why)) {
    logger().error("the trace was not written: {}", why);
  }
}

std::string trace_path_for_run(const std::string& base, unsigned long long run) {
  const auto dot = base.rfind('.');
  const auto slash = base.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return base + "." + std::to_string(run) + ".json";
  }
  return base.substr(0, dot) + "." + std::to_string(run) + base.substr(dot);
}

}  // namespace loom::detail
