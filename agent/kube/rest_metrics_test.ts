import assert from "node:assert/strict";
import { Registry } from "../../net/prometheus.ts";
import {
  createRestClientMetrics,
  httpStatus,
  recordRequest,
  REST_CLIENT_BUCKETS,
  setRestClientMetrics,
  timedRequest,
} from "./rest_metrics.ts";

Deno.test("rest client metrics: component-base's buckets", () => {
  assert.deepEqual(REST_CLIENT_BUCKETS, [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60]);
});

Deno.test("timedRequest counts answered, failed and unanswered requests", async () => {
  const registry = new Registry();
  setRestClientMetrics(createRestClientMetrics(registry));
  try {
    const url = "https://198.18.0.9:6443/api/v1/services?limit=500";
    await timedRequest("GET", url, () => Promise.resolve(new Response("{}")), httpStatus);
    await timedRequest(
      "GET",
      url,
      () => Promise.resolve(new Response("", { status: 410 })),
      httpStatus,
    );
    // client-node's ApiException carries the status in `code`.
    await assert.rejects(
      timedRequest(
        "GET",
        url,
        () => Promise.reject(Object.assign(new Error("x"), { code: 403 })),
        httpStatus,
      ),
    );
    await assert.rejects(
      timedRequest(
        "GET",
        url,
        () => Promise.reject(new TypeError("connection refused")),
        httpStatus,
      ),
    );
    recordRequest(
      "POST",
      "https://198.18.0.9:6443/apis/events.k8s.io/v1/namespaces/default/events",
      201,
      0.2,
    );
    const text = await registry.metrics();
    const host = `host="198.18.0.9:6443"`;
    assert.match(
      text,
      new RegExp(`rest_client_requests_total\\{code="200",method="GET",${host}\\} 1`),
    );
    assert.match(
      text,
      new RegExp(`rest_client_requests_total\\{code="410",method="GET",${host}\\} 1`),
    );
    assert.match(
      text,
      new RegExp(`rest_client_requests_total\\{code="403",method="GET",${host}\\} 1`),
    );
    assert.match(
      text,
      new RegExp(`rest_client_requests_total\\{code="<error>",method="GET",${host}\\} 1`),
    );
    assert.match(
      text,
      new RegExp(`rest_client_requests_total\\{code="201",method="POST",${host}\\} 1`),
    );
    assert.match(
      text,
      new RegExp(`rest_client_request_duration_seconds_count\\{verb="GET",${host}\\} 4`),
    );
    assert.match(
      text,
      new RegExp(
        `rest_client_request_duration_seconds_bucket\\{le="0.25",verb="POST",${host}\\} 1`,
      ),
    );
  } finally {
    setRestClientMetrics(undefined);
  }
});
