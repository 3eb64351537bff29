#include "ddpio/storage/s3/s3_xml.h"

#include "absl/strings/str_cat.h"

namespace ddpio::storage::s3 {
namespace {

std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out.push_back(s[i]);
      continue;
    }
    static constexpr struct {
      std::string_view entity;
      char c;
    } kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool done = false;
    for (const auto& e : kEntities) {
      if (s.substr(i, e.entity.size()) == e.entity) {
        out.push_back(e.c);
        i += e.entity.size() - 1;
        done = true;
        break;
      }
    }
    if (!done) out.push_back('&');
  }
  return out;
}

// The text of the next <tag>...</tag> at or after *from; advances *from past it.
bool Next(std::string_view xml, std::string_view tag, size_t* from, std::string* text) {
  const std::string open = absl::StrCat("<", std::string(tag), ">");
  const std::string close = absl::StrCat("</", std::string(tag), ">");
  const size_t start = xml.find(open, *from);
  if (start == std::string_view::npos) return false;
  const size_t body = start + open.size();
  const size_t end = xml.find(close, body);
  if (end == std::string_view::npos) return false;
  *text = Unescape(xml.substr(body, end - body));
  *from = end + close.size();
  return true;
}

}  // namespace

std::string XmlText(std::string_view xml, std::string_view tag) {
  size_t from = 0;
  std::string text;
  return Next(xml, tag, &from, &text) ? text : std::string();
}

std::vector<std::string> XmlTexts(std::string_view xml, std::string_view tag, size_t limit) {
  std::vector<std::string> out;
  size_t from = 0;
  std::string text;
  while (out.size() < limit && Next(xml, tag, &from, &text)) out.push_back(std::move(text));
  return out;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace ddpio::storage::s3
