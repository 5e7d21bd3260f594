"""docs/openapi.yaml: a well-formed OpenAPI 3.1 file, every operation in it served by a real
`kvq serve`, and the answer checker (kvq_server.OpenApi) that every e2e test runs refusing what
the spec does not describe.

That the spec holds every route the server registers (and no other), with the right ones public,
is src/server/openapi_routes_test.cc's check against the Router itself; it reads the `paths` block
by its shape, which test_route_reader_sees_what_yaml_sees below keeps true.
"""

import http.client
import re
import unittest

import jsonschema
import yaml

from kvq_server import OPENAPI_FILE, OpenApi, Response, ServerTestCase, check_answer, q, uniq

METHODS = ("get", "put", "post", "delete", "head", "options", "patch", "trace")


def text():
    with open(OPENAPI_FILE) as f:
        return f.read()


def load():
    return yaml.safe_load(text())


def walk(node, where="#"):
    """Every (json pointer, dict) in `node`."""
    if isinstance(node, dict):
        yield where, node
        for k, v in node.items():
            yield from walk(v, "%s/%s" % (where, str(k).replace("~", "~0").replace("/", "~1")))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, "%s/%d" % (where, i))


def pointer(spec, ref):
    if not ref.startswith("#/"):
        raise KeyError("not a local reference: %s" % ref)
    node = spec
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def operations(spec):
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield path, method, item, op


def route_reader(text):
    """A Python twin of openapi_routes_test.cc's reader: {(METHOD, path): public}."""
    ops, in_paths, path, current = {}, False, None, None
    for line in text.splitlines():
        line = line.rstrip(" \r")
        indent = len(line) - len(line.lstrip(" "))
        if not line or line[indent] == "#":
            continue
        if indent == 0:
            in_paths, current = line == "paths:", None
            continue
        if not in_paths:
            continue
        key = line[indent:-1].strip("'\"") if line.endswith(":") else None
        if indent == 2 and key:
            path, current = key, None
        elif indent == 4 and key:
            current = None
            if key in METHODS:
                current = (key.upper(), path)
                ops[current] = False
        elif current and indent == 6 and line[6:] == "security: []":
            ops[current] = True
    return ops


class SpecStructureTest(unittest.TestCase):
    """Cheap structural checks of OpenAPI 3.1 (no full meta-schema: nothing to download)."""

    @classmethod
    def setUpClass(cls):
        cls.spec = load()

    def test_is_openapi_3_1(self):
        self.assertRegex(str(self.spec.get("openapi")), r"^3\.1\.\d+$")
        self.assertTrue(self.spec["info"]["title"])
        self.assertTrue(self.spec["info"]["version"])
        self.assertGreater(len(self.spec["paths"]), 20)
        for path in self.spec["paths"]:
            self.assertTrue(path.startswith("/"), path)

    def test_every_ref_resolves(self):
        refs = 0
        for where, node in walk(self.spec):
            if isinstance(node.get("$ref"), str):
                refs += 1
                try:
                    pointer(self.spec, node["$ref"])
                except (KeyError, IndexError, TypeError) as e:
                    self.fail("%s: $ref %s does not resolve (%r)" % (where, node["$ref"], e))
        self.assertGreater(refs, 50, "the spec should reuse its components")

    def test_every_component_is_used(self):
        spec_text = text()
        for kind in ("schemas", "responses", "parameters"):
            for name in self.spec["components"][kind]:
                ref = "#/components/%s/%s" % (kind, name)
                self.assertIn('"%s"' % ref, spec_text, "%s is never referenced" % ref)

    def test_operations_have_unique_ids_and_responses(self):
        seen = {}
        for path, method, _, op in operations(self.spec):
            name = "%s %s" % (method.upper(), path)
            op_id = op.get("operationId")
            self.assertIsInstance(op_id, str, "%s has no operationId" % name)
            self.assertNotIn(op_id, seen, "%s and %s share operationId %s"
                             % (name, seen.get(op_id), op_id))
            seen[op_id] = name
            self.assertTrue(op.get("responses"), "%s has no responses" % name)
            for status, response in op["responses"].items():
                self.assertRegex(str(status), r"^([1-5][0-9][0-9]|[1-5]XX|default)$", name)
                if "$ref" in response:
                    response = pointer(self.spec, response["$ref"])
                self.assertTrue(response.get("description"), "%s %s: no description"
                                % (name, status))
            self.assertIn("default", op["responses"], "%s: no default (error) answer" % name)

    def test_path_parameters_match_the_templates(self):
        for path, method, item, op in operations(self.spec):
            params = [pointer(self.spec, p["$ref"]) if "$ref" in p else p
                      for p in item.get("parameters", []) + op.get("parameters", [])]
            declared = {p["name"] for p in params if p["in"] == "path"}
            self.assertEqual(declared, set(re.findall(r"\{([^}]+)\}", path)),
                             "%s %s: path parameters" % (method.upper(), path))
            for p in params:
                self.assertIn(p["in"], ("path", "query", "header", "cookie"), path)
                self.assertIn("schema", p, "%s: parameter %s has no schema" % (path, p["name"]))
                if p["in"] == "path":
                    self.assertIs(p.get("required"), True, "%s: %s" % (path, p["name"]))

    def test_security_names_a_scheme(self):
        schemes = self.spec["components"]["securitySchemes"]
        self.assertEqual(schemes["bearer"], {**schemes["bearer"], "type": "http",
                                             "scheme": "bearer"})
        for requirement in self.spec["security"]:
            for name in requirement:
                self.assertIn(name, schemes)
        for path, method, _, op in operations(self.spec):
            for requirement in op.get("security", []):
                for name in requirement:
                    self.assertIn(name, schemes, "%s %s" % (method, path))

    def test_every_schema_is_valid_json_schema_2020_12(self):
        checker = OpenApi.get()
        for where, node in walk(self.spec):
            if "schema" in node and isinstance(node["schema"], dict):
                try:
                    jsonschema.Draft202012Validator.check_schema(checker.resolve(node["schema"]))
                except jsonschema.SchemaError as e:
                    self.fail("%s/schema: %s" % (where, e.message))
        for name, schema in self.spec["components"]["schemas"].items():
            jsonschema.Draft202012Validator.check_schema(checker.resolve(schema))

    def test_route_reader_sees_what_yaml_sees(self):
        # openapi_routes_test.cc reads the file by its shape; the shape must say what YAML says.
        want = {(m.upper(), p): op.get("security") == []
                for p, m, _, op in operations(self.spec)}
        self.assertEqual(route_reader(text()), want)
        self.assertEqual(sum(want.values()), 3, "/healthz, / and /dashboard are public")


class CheckerTest(unittest.TestCase):
    """The answer checker the e2e suite runs refuses answers the spec does not describe."""

    def setUp(self):
        self.api = OpenApi.get()

    def check(self, method, target, status, body, ctype="application/json"):
        raw = body if isinstance(body, (bytes, str)) else __import__("json").dumps(body)
        raw = raw.encode() if isinstance(raw, str) else raw
        return check_answer(method, target, Response(status, {"content-type": ctype}, raw))

    def test_routes_by_method_and_literal_segments(self):
        self.assertEqual(self.api.route("POST", "/v1/jobs/t/batch")[0], "/v1/jobs/{type}/batch")
        self.assertEqual(self.api.route("GET", "/v1/jobs/t/batch")[0], "/v1/jobs/{type}/{id}")
        self.assertEqual(self.api.route("GET", "/v1/workers/w/events")[0],
                         "/v1/workers/{wtype}/events")
        self.assertEqual(self.api.route("GET", "/v1/jobs/a%2Fb/c?x=1")[0], "/v1/jobs/{type}/{id}")
        self.assertEqual(self.api.route("GET", "/")[0], "/")
        self.assertEqual(self.api.route("GET", "/nope"), (None, None))
        pattern, op = self.api.route("PUT", "/v1/jobs/t/j")
        self.assertEqual((pattern, op), ("/v1/jobs/{type}/{id}", None))

    def test_a_described_answer_passes(self):
        self.check("GET", "/v1/jobs/t/j/wait", 200, {"type": "t", "id": "j", "found": False})
        self.check("POST", "/v1/accept/t", 204, b"", ctype=None)
        self.check("GET", "/v1/jobs/t", 404, {"error": "not_found", "message": "no"})
        self.check("GET", "/nope", 404, {"error": "no_route", "message": "no route"})
        self.check("GET", "/metrics", 200, "kvq_accepts_total 1\n", "text/plain; version=0.0.4")

    def test_a_wrong_answer_fails_naming_route_status_and_error(self):
        with self.assertRaisesRegex(AssertionError,
                                    r"GET /v1/jobs/\{type\}/\{id\} answered 200.*'state'"):
            self.check("GET", "/v1/jobs/t/j", 200, {"type": "t", "id": "j"})
        with self.assertRaisesRegex(AssertionError, r"answered 400.*'oops' is not one of"):
            self.check("POST", "/v1/jobs/t", 400, {"error": "oops", "message": "m"})
        with self.assertRaisesRegex(AssertionError, r"Additional properties"):
            self.check("POST", "/v1/jobs/t/j/finish", 200, {"extra": 1})
        with self.assertRaisesRegex(AssertionError, r"no body"):
            self.check("GET", "/v1/types", 200, b"")
        with self.assertRaisesRegex(AssertionError, r"GET /v1/types answered 204 with no body"):
            self.check("GET", "/v1/types", 204, b"", ctype=None)
        with self.assertRaisesRegex(AssertionError, r"described as"):
            self.check("GET", "/v1/types", 200, "<html>", "text/html")
        with self.assertRaisesRegex(AssertionError, r"event 'nope'"):
            self.api.check_event("/v1/jobs/t/j/events", "nope", {})
        with self.assertRaisesRegex(AssertionError, r"'seq' is a required property"):
            self.api.check_event("/v1/jobs/t/j/events", "job",
                                 {"type": "t", "id": "j", "found": True, "state": "pending",
                                  "outcome": None, "data": {}, "data_format": "json",
                                  "result": None, "attempts": 0, "gave_up": False})


def concrete(path):
    """A request target for a path template: each {parameter} a fresh name."""
    return re.sub(r"\{[^}]+\}", lambda m: q(uniq("p")), path)


class EveryOperationIsServedTest(ServerTestCase):
    """Each (method, path) of the spec reaches a route of a real server: never no_route nor
    method_not_allowed, and each answer is one the spec describes (the client checks it)."""

    server_kwargs = {"token": "s3cret"}

    def test_every_operation_reaches_a_route(self):
        spec = load()
        served = 0
        for path, method, _, op in operations(spec):
            target = concrete(path)
            if path.endswith("/events"):
                # A stream: its status line is enough (a 404 or 200 is a route's answer).
                conn = self.c.connection(10)
                try:
                    conn.request("GET", target, headers={"Authorization": "Bearer s3cret"})
                    r = conn.getresponse()
                    status, ctype = r.status, r.getheader("Content-Type")
                    body = r.read() if status != 200 else b""
                finally:
                    conn.close()
                if status != 200:
                    check_answer("GET", target, Response(status, {"content-type": ctype}, body))
                else:
                    self.assertEqual(ctype, "text/event-stream", target)
            else:
                body = {} if method in ("post", "put") else None
                r = self.c.request(method.upper(), target, body=body)
                status = r.status
                self.assertNotIn(r.error, ("no_route", "method_not_allowed"),
                                 "%s %s: %r" % (method.upper(), path, r))
            self.assertNotIn(status, (405,), "%s %s" % (method.upper(), path))
            served += 1
        self.assertEqual(served, sum(1 for _ in operations(spec)))

    def test_public_operations_need_no_token_and_others_do(self):
        for path, method, _, op in operations(load()):
            if path.endswith("/events"):
                continue
            r = self.c.request(method.upper(), concrete(path),
                               body={} if method in ("post", "put") else None, token=None)
            if op.get("security") == []:
                self.assertNotEqual(r.status, 401, "%s %s is public: %r" % (method, path, r))
            else:
                self.assertStatus(r, 401, "unauthorized")

    def test_streams_and_waits_answer_as_described(self):
        # The client checks each answer and event against the spec; these are the ones the rest
        # of the suite exercises least.
        jtype, wtype = uniq("openapi"), uniq("openapi-w")
        self.c.set_timeout(jtype, 30)
        self.assertStatus(self.c.add(jtype, "j", {"k": 1}), 200)
        self.assertStatus(self.c.get("/v1/jobs/%s/j/wait?state=nope" % q(jtype)), 400,
                          "invalid_argument")
        stream = self.c.events("/v1/jobs/%s/j/events" % q(jtype))
        try:
            self.assertEqual(stream.status, 200)
            name, event = stream.next_event()
            self.assertEqual((name, event["state"], event["found"]), ("job", "pending", True))
            self.assertStatus(self.c.delete("/v1/jobs/%s/j" % q(jtype)), 200)
            name, event = stream.next_event()
            self.assertEqual((name, event), ("job", {"type": jtype, "id": "j", "found": False}))
        finally:
            stream.close()
        reg = self.assertStatus(self.c.post("/v1/workers/%s" % q(wtype),
                                            {"id": "w1", "info": {"host": "h"}}), 200)
        stream = self.c.events("/v1/workers/%s/events" % q(wtype))
        try:
            self.assertEqual(stream.status, 200)
            name, membership = stream.next_event()
            self.assertEqual(name, "membership")
            self.assertEqual([w["id"] for w in membership["workers"]], ["w1"])
        finally:
            stream.close()
        self.assertStatus(self.c.delete("/v1/workers/%s/w1?token=%s" % (q(wtype), reg["token"])),
                          200)

    def test_dashboard_and_metrics_are_not_json(self):
        self.assertTrue(self.c.get("/").headers["content-type"].startswith("text/html"))
        self.assertTrue(self.c.get("/metrics").headers["content-type"].startswith("text/plain"))


if __name__ == "__main__":
    unittest.main()
