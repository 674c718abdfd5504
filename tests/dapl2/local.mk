# tests/dapl2: Debian's dapl2-utils (dtest, dtestsrq, dtestcm, dtestx,
# dapltest), unmodified DAT 2.0 programs, run against this build's
# libdat2.so.2 and private datds (issue 8).  One automake test: the script
# prints a PASS/FAIL/SKIP/XFAIL line per program and mode, and reports
# itself skipped (77, "skipped: <why>") when it cannot run here.
TESTS += tests/dapl2/run-dapl2-utils
EXTRA_DIST += tests/dapl2/run-dapl2-utils
