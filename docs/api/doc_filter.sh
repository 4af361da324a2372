#!/bin/sh
# Doxygen input filter: the public headers document with plain // comments; read them as ///
# (a comment line before a declaration) and ///< (a comment after a declaration on its line).
# Backslashes, @ and < in comments are escaped so that Doxygen takes them as text.
exec sed -E \
  -e '/^[[:space:]]*\/\/[^/]?/{ s/\\/\\\\/g; s/@/\\@/g; s/</\\</g; s/>/\\>/g; s/#/\\#/g; s/%/\\%/g; s#^([[:space:]]*)//#\1///#; }' \
  -e 's#^([^/]*[;{,][[:space:]]+)//[[:space:]]?(.*)$#\1///< \2#' \
  "$1"
