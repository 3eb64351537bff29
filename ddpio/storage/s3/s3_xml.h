// The little of S3's XML that ddpio reads: error documents (<Code>, <Message>), the upload id of
// a multipart upload, the parts and keys of listings. A tag's text, found by name, with the five
// XML entities decoded; no DTDs, no namespaces, no recursion. Responses come from the network:
// any bytes give a result or nothing, never a crash (fuzzed: s3_xml_fuzz). Pure, thread-safe.
#ifndef DDPIO_STORAGE_S3_S3_XML_H_
#define DDPIO_STORAGE_S3_S3_XML_H_

#include <string>
#include <string_view>
#include <vector>

namespace ddpio::storage::s3 {

// The text of the first <tag>...</tag> in `xml`, or "" when there is none.
std::string XmlText(std::string_view xml, std::string_view tag);
// The texts of every <tag>...</tag> in order (at most `limit` of them).
std::vector<std::string> XmlTexts(std::string_view xml, std::string_view tag,
                                  size_t limit = 100000);
// `text` with &amp; &lt; &gt; &quot; &apos; escaped, for request bodies.
std::string XmlEscape(std::string_view text);

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_S3_XML_H_
