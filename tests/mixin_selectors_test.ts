import assert from "node:assert/strict";
import { parseExposition, select } from "./mixin_selectors.ts";

const TEXT = `# HELP rest_client_requests_total x
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",method="GET",host="198.18.0.9:6443"} 12
rest_client_requests_total{code="410",method="GET",host="198.18.0.9:6443"} 1
rest_client_request_duration_seconds_bucket{le="0.005",verb="GET",host="h"} 3
process_resident_memory_bytes 1.5e+08
`;

Deno.test("selectors match names and label matchers like PromQL", () => {
  const s = parseExposition(TEXT);
  assert.equal(s.length, 4);
  assert.equal(select(s, 'rest_client_requests_total{code=~"2.."}').length, 1);
  assert.equal(select(s, 'rest_client_requests_total{code=~"4.."}')[0].value, 1);
  assert.equal(select(s, 'rest_client_requests_total{code=~"5.."}').length, 0);
  assert.equal(select(s, 'rest_client_requests_total{code!="200"}').length, 1);
  assert.equal(select(s, 'rest_client_request_duration_seconds_bucket{verb="GET"}').length, 1);
  assert.equal(select(s, 'rest_client_request_duration_seconds_bucket{verb="POST"}').length, 0);
  assert.equal(select(s, "process_resident_memory_bytes")[0].value, 1.5e8);
  // A regex matches the whole value, as in PromQL.
  assert.equal(select(s, 'rest_client_requests_total{code=~"2"}').length, 0);
});
