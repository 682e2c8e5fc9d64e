#include <tdgen/code_template.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace tdgen {

CodeTemplate CodeTemplate::load(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TemplateError("cannot read template '" + path + "' (see --templates)");
  std::ostringstream text;
  text << in.rdbuf();
  return CodeTemplate(name, text.str());
}

std::string CodeTemplate::render(const Values& values) const {
  std::string out;
  out.reserve(text_.size() * 2);
  std::set<std::string> used;
  size_t pos = 0;
  while (true) {
    const size_t open = text_.find("{{", pos);
    if (open == std::string::npos) break;
    const size_t close = text_.find("}}", open + 2);
    const int line = 1 + static_cast<int>(std::count(text_.begin(), text_.begin() + static_cast<long>(open), '\n'));
    if (close == std::string::npos)
      throw TemplateError(name_ + ":" + std::to_string(line) + ": unterminated placeholder");
    const std::string key = text_.substr(open + 2, close - open - 2);
    for (char c : key)
      if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
        throw TemplateError(name_ + ":" + std::to_string(line) + ": bad placeholder name '" + key + "'");
    auto it = values.find(key);
    if (it == values.end())
      throw TemplateError(name_ + ":" + std::to_string(line) + ": placeholder {{" + key + "}} has no value");
    used.insert(key);
    out.append(text_, pos, open - pos);
    out += it->second;
    pos = close + 2;
  }
  out.append(text_, pos, std::string::npos);
  for (const auto& kv : values)
    if (!used.count(kv.first)) throw TemplateError(name_ + ": value '" + kv.first + "' is not used by the template");
  return out;
}

}  // namespace tdgen
