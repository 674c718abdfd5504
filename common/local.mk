noinst_HEADERS += common/macro.h
