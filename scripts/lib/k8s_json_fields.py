#!/usr/bin/env python3
"""Lists where the Kubernetes API's JSON form differs from its protobuf form, field by field.

  k8s_json_fields.py MODULE_DIR PROTO_PACKAGE_PREFIX > json_fields.txt

Read from the Go types (types.go), which carry both the json and the protobuf tags:
  inline <message> <field>         Go embeds the field with `json:",inline"`: the .proto file
                                   nests it (Probe.handler), JSON puts its members in the parent.
  rename <message> <field> <json>  the JSON name differs from the protobuf name
                                   (admissionregistration's Webhooks is "webhooks" in JSON).
The C++ client reads these lines to produce the JSON form from protobuf.
"""
import os
import re
import sys

STRUCT = re.compile(r"^type (\w+) struct \{")
NAMED = re.compile(r"^\s+(\w+)\s+\S+\s+`([^`]*)`")
EMBEDDED = re.compile(r"^\s+(\*?[\w.]+)\s+`([^`]*)`")
JSON = re.compile(r'json:"([^"]*)"')
PROTOBUF = re.compile(r'protobuf:"([^"]*)"')
NAME = re.compile(r"name=(\w+)")


def main():
    module_dir, prefix = sys.argv[1], sys.argv[2]
    lines = []
    for root, _, files in sorted(os.walk(module_dir)):
        if "types.go" not in files:
            continue
        package = prefix + "." + os.path.relpath(root, module_dir).replace(os.sep, ".")
        struct = None
        with open(os.path.join(root, "types.go"), encoding="utf-8") as source:
            for line in source:
                if match := STRUCT.match(line):
                    struct = match.group(1)
                    continue
                if line.startswith("}"):
                    struct = None
                    continue
                embedded_field = EMBEDDED.match(line)
                field = embedded_field or NAMED.match(line)
                if not struct or not field:
                    continue
                json_tag, protobuf_tag = JSON.search(field.group(2)), PROTOBUF.search(field.group(2))
                if not json_tag or not protobuf_tag:
                    continue
                json_name = json_tag.group(1).split(",")[0]
                named = NAME.search(protobuf_tag.group(1))
                if embedded_field:
                    # An embedded type. Without name=, go-to-protobuf names it after the type.
                    embedded = field.group(1).lstrip("*").split(".")[-1]
                    proto_name = named.group(1) if named else embedded[0].lower() + embedded[1:]
                    if json_tag.group(1) == ",inline":
                        lines.append(f"inline {package}.{struct} {proto_name}")
                    continue
                if named and json_name and json_name != "-" and json_name != named.group(1):
                    lines.append(f"rename {package}.{struct} {named.group(1)} {json_name}")
    print("\n".join(sorted(set(lines))))


if __name__ == "__main__":
    main()
