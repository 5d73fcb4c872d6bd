#!/bin/sh
# Builds an extension update script: prints the template ($1) with its line
# "-- @@CDC_APPLY_0.2.0_SCRIPT@@" replaced by the version script ($2) less
# its \echo guard line.  Used by the Makefile and CMakeLists.txt for
# sql/cdc_apply--0.1.0--0.2.0.sql (docs/sql-reference.md, "Upgrading").
set -eu
template=$1
script=$2
grep -q '^-- @@CDC_APPLY_0.2.0_SCRIPT@@$' "$template" || { echo "$0: no marker line in $template" >&2; exit 1; }
awk -v script="$script" -v name="$(basename "$script")" '
	$0 == "-- @@CDC_APPLY_0.2.0_SCRIPT@@" {
		print "-- ===== begin of sql/" name " ====="
		while ((getline line < script) > 0)
			if (line !~ /^\\echo /)
				print line
		close(script)
		print "-- ===== end of sql/" name " ====="
		next
	}
	{ print }
' "$template"
