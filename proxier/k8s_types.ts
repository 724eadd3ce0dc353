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
  /** metadata.name. */
  name?: string;
  /** metadata.namespace. */
  namespace?: string;
  /** metadata.labels. */
  labels?: Record<string, string> | null;
  /** metadata.annotations. */
  annotations?: Record<string, string> | null;
  /** metadata.resourceVersion. */
  resourceVersion?: string;
}

/** core/v1 ServicePort. */
export interface V1ServicePort {
  /** The port's name. */
  name?: string | null;
  /** TCP (default), UDP or SCTP. */
  protocol?: string | null;
  /** The Service port. */
  port?: number | null;
  /** The NodePort, when allocated. */
  nodePort?: number | null;
  /** The endpoints' port or its name (read from the slices instead). */
  targetPort?: number | string | null;
}

/** core/v1 Service. */
export interface V1Service {
  /** Object metadata. */
  metadata?: ObjectMeta;
  /** The fields of spec the proxy reads. */
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
  /** The LoadBalancer ingress. */
  status?: {
    loadBalancer?: {
      ingress?: { ip?: string | null; hostname?: string | null; ipMode?: string | null }[] | null;
    } | null;
  } | null;
}

/** discovery.k8s.io/v1 EndpointPort. */
export interface EndpointPort {
  /** The port's name (matches the Service port's). */
  name?: string | null;
  /** TCP (default), UDP or SCTP. */
  protocol?: string | null;
  /** The endpoints' port. */
  port?: number | null;
  /** The application protocol (not used for rules). */
  appProtocol?: string | null;
}

/** discovery.k8s.io/v1 Endpoint. */
export interface Endpoint {
  /** The endpoint's addresses (the first is used). */
  addresses?: string[] | null;
  /** ready, serving, terminating. */
  conditions?:
    | { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null }
    | null;
  /** The node it runs on. */
  nodeName?: string | null;
  /** The zone it runs in. */
  zone?: string | null;
  /** The object behind the endpoint (a Pod): tells one endpoint moved between slices from two. */
  targetRef?: {
    kind?: string | null;
    namespace?: string | null;
    name?: string | null;
    uid?: string | null;
  } | null;
  /** Topology hints: the zones and nodes that should use it. */
  hints?: {
    forZones?: { name?: string | null }[] | null;
    forNodes?: { name?: string | null }[] | null;
  } | null;
}

/** discovery.k8s.io/v1 EndpointSlice. */
export interface EndpointSlice {
  /** Object metadata (the service-name label). */
  metadata?: ObjectMeta;
  /** IPv4, IPv6 or FQDN (ignored). */
  addressType?: string | null;
  /** The endpoints. */
  endpoints?: Endpoint[] | null;
  /** The ports every endpoint serves. */
  ports?: EndpointPort[] | null;
}

/** core/v1 Node. */
export interface V1Node {
  /** Object metadata (the topology labels). */
  metadata?: ObjectMeta;
  /** The pod CIDRs. */
  spec?: { podCIDR?: string | null; podCIDRs?: string[] | null } | null;
  /** The node's addresses (InternalIP, ExternalIP). */
  status?: { addresses?: { type?: string | null; address?: string | null }[] | null } | null;
}

/** networking.k8s.io/v1 ServiceCIDR. */
export interface ServiceCIDR {
  /** Object metadata. */
  metadata?: ObjectMeta;
  /** The CIDRs of the range. */
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
