#!/usr/bin/env python3
"""Generates kproxy's Kafka codec (C++) from the facts-only schema made by import_schema.py.

Usage:
  generate.py --schema codec/gen/kafka-4.4.0-messages.json --out <build>/codec/gen_include [--chunks N]
  generate.py --schema ... --out ... --list-outputs      # prints the files it would write

Writes, under <out>/codec/generated/ (so that an #include names a generated file as one,
"codec/generated/messages.h"):
  api_keys.h/.cc          ApiKey enum, names, version ranges, header-version table
  error_code.h/.cc        ErrorCode enum and names
  messages.h              includes every per-API header below
  messages/<api>.h        the request and response structs of one API (e.g. messages/metadata.h)
  messages/request_header_data.h, messages/response_header_data.h
  messages_<i>.cc         the method bodies, several APIs per file (compile time on 2 cores)
  message_factory.cc      make_request / make_response
  response_scan.h/.cc     scan_response: a response's error codes and top-level tags, nothing decoded
  testing/fill.h, testing/fill_<i>.cc   smallest and random instances (unit tests only)

Naming (see codec/gen/README.md): a message is a struct named as in Kafka (`MetadataResponse`);
its nested and common structs are declared flat inside it under Kafka's struct names
(`MetadataResponse::MetadataResponseBroker`); members are snake_case of Kafka's field names
(`ThrottleTimeMs` -> `throttle_time_ms`), with `_` appended on a clash with a method or keyword.
The schema is checked strictly: anything this generator does not understand stops it.

Modules (Python 3 standard library only):
  model.py               the schema read into messages, structs and fields (checks, names, C++ types)
  wire.py                one class per field type: read, write, size, scan, fill, JSON, default
  cpp.py                 C++ text helpers (version conditions, blocks) and the output files
  emit_api_keys.py       api_keys.h/.cc
  emit_error_codes.py    error_code.h/.cc
  emit_messages.py       messages.h, messages/*.h, messages_<i>.cc, message_factory.cc
  emit_fill.py           testing/fill.h, testing/fill_<i>.cc, testing/make_instance.cc
  emit_response_scan.py  response_scan.h/.cc
"""

import argparse
import json
import os
import sys

sys.dont_write_bytecode = True  # run from the source tree at build time: leave no __pycache__ there

import emit_api_keys  # noqa: E402
import emit_error_codes  # noqa: E402
import emit_fill  # noqa: E402
import emit_messages  # noqa: E402
import emit_response_scan  # noqa: E402
from cpp import Output  # noqa: E402
from model import GenError, MessageDef  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schema", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunks", type=int, default=6)
    ap.add_argument("--test-chunks", type=int, default=3)
    ap.add_argument("--list-outputs", action="store_true")
    args = ap.parse_args()
    with open(args.schema) as fh:
        doc = json.load(fh)
    for key in ("kafka_version", "messages", "errors"):
        if key not in doc:
            raise GenError(f"{args.schema}: missing {key!r}")
    schema_rel = "codec/gen/" + os.path.basename(args.schema)
    all_msgs = [MessageDef(m) for m in doc["messages"]]
    reqs = {m.api_key: m for m in all_msgs if m.kind == "request"}
    resps = {m.api_key: m for m in all_msgs if m.kind == "response"}
    if set(reqs) != set(resps):
        raise GenError("request and response api keys differ: " + str(sorted(set(reqs) ^ set(resps))))
    names = [m.name for m in all_msgs]
    if len(set(names)) != len(names):
        raise GenError("duplicate message names")
    if not {"RequestHeader", "ResponseHeader"} <= set(names):
        raise GenError("schema lacks RequestHeader/ResponseHeader")
    msgs = [m for m in all_msgs if not m.removed]
    out = Output(args.out, schema_rel)
    emit_api_keys.emit(out, reqs, resps)
    emit_error_codes.emit(out, doc["errors"])
    emit_messages.emit(out, msgs, args.chunks)
    emit_fill.emit(out, msgs, args.test_chunks)
    emit_response_scan.emit(out, msgs)
    if args.list_outputs:
        for rel in sorted(out.files):
            print(rel)
        return
    out.write()


if __name__ == "__main__":
    try:
        main()
    except GenError as e:
        sys.exit(f"generate.py: error: {e}")
