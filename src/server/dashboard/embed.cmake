# Writes OUTPUT: a C++ file defining kvq::server::dashboard_page(), the text of INPUT in a raw
# string literal. Run at build time (src/server/CMakeLists.txt):
#   cmake -DINPUT=index.html -DOUTPUT=dashboard_page.cc -P embed.cmake
file(READ "${INPUT}" page)
set(delimiter "kvqpage")
string(FIND "${page}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains ')${delimiter}\"', which would end the raw string literal early")
endif()
file(WRITE "${OUTPUT}"
  "// Generated from ${INPUT} by embed.cmake at build time: edit that file instead.\n"
  "#include <string_view>\n\n"
  "namespace kvq::server {\n\n"
  "std::string_view dashboard_page();\n"
  "std::string_view dashboard_page() {\n"
  "  return R\"${delimiter}(${page})${delimiter}\";\n"
  "}\n\n"
  "}  // namespace kvq::server\n")
