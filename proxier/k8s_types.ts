/**
 * Minimal structural types for the Kubernetes objects the trackers read, as
 * the API server returns them in JSON. Only the fields we use are listed and
 * every one is optional: the trackers validate what they read, so a
 * malformed object yields a log line, never a crash. Objects from
 * `@kubernetes/client-node` are assignable to these types.
 *
 * @module
 */

/** Object metadata fields we read. */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  labels?: Record<string, string> | null;
  annotations?: Record<string, string> | null;
  resourceVersion?: string;
}

/** core/v1 ServicePort. */
export interface V1ServicePort {
  name?: string | null;
  protocol?: string | null;
  port?: number | null;
  nodePort?: number | null;
  targetPort?: number | string | null;
}

/** core/v1 Service. */
export interface V1Service {
  metadata?: ObjectMeta;
  spec?: {
    type?: string | null;
    clusterIP?: string | null;
    clusterIPs?: string[] | null;
    ports?: V1ServicePort[] | null;
    externalIPs?: string[] | null;
    loadBalancerSourceRanges?: string[] | null;
    sessionAffinity?: string | null;
    sessionAffinityConfig?: { clientIP?: { timeoutSeconds?: number | null } | null } | null;
    externalTrafficPolicy?: string | null;
    internalTrafficPolicy?: string | null;
    healthCheckNodePort?: number | null;
    ipFamilies?: string[] | null;
  } | null;
  status?: {
    loadBalancer?: {
      ingress?: { ip?: string | null; hostname?: string | null; ipMode?: string | null }[] | null;
    } | null;
  } | null;
}

/** discovery.k8s.io/v1 EndpointPort. */
export interface EndpointPort {
  name?: string | null;
  protocol?: string | null;
  port?: number | null;
  appProtocol?: string | null;
}

/** discovery.k8s.io/v1 Endpoint. */
export interface Endpoint {
  addresses?: string[] | null;
  conditions?:
    | { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null }
    | null;
  nodeName?: string | null;
  zone?: string | null;
  /** The object behind the endpoint (a Pod): tells one endpoint moved between slices from two. */
  targetRef?: {
    kind?: string | null;
    namespace?: string | null;
    name?: string | null;
    uid?: string | null;
  } | null;
  hints?: {
    forZones?: { name?: string | null }[] | null;
    forNodes?: { name?: string | null }[] | null;
  } | null;
}

/** discovery.k8s.io/v1 EndpointSlice. */
export interface EndpointSlice {
  metadata?: ObjectMeta;
  addressType?: string | null;
  endpoints?: Endpoint[] | null;
  ports?: EndpointPort[] | null;
}

/** core/v1 Node. */
export interface V1Node {
  metadata?: ObjectMeta;
  spec?: { podCIDR?: string | null; podCIDRs?: string[] | null } | null;
  status?: { addresses?: { type?: string | null; address?: string | null }[] | null } | null;
}

/** networking.k8s.io/v1 ServiceCIDR. */
export interface ServiceCIDR {
  metadata?: ObjectMeta;
  spec?: { cidrs?: string[] | null } | null;
}

/** Label on EndpointSlices naming their Service. */
export const LABEL_SERVICE_NAME = "kubernetes.io/service-name";
/** Label that hands a Service (and its slices) to another proxy: such objects are ignored. */
export const LABEL_SERVICE_PROXY_NAME = "service.kubernetes.io/service-proxy-name";
/** Label the EndpointSlice controller puts on slices of headless Services. */
export const LABEL_HEADLESS = "service.kubernetes.io/headless";

/**
 * Whether `prev` and `cur` are the same version of one object (an informer
 * re-delivering it): both carry the same non-empty resourceVersion.
 */
export function sameVersion(
  prev: { metadata?: ObjectMeta } | null,
  cur: { metadata?: ObjectMeta } | null,
): boolean {
  const a = prev?.metadata?.resourceVersion;
  return !!a && a === cur?.metadata?.resourceVersion &&
    prev?.metadata?.name === cur?.metadata?.name &&
    prev?.metadata?.namespace === cur?.metadata?.namespace;
}
