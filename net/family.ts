/**
 * IP families: the one `4 | 6` type, its Kubernetes label ("IPv4"), and the nftables table
 * family that holds its rules ("ip", "ip6"; the nftables `Family` type is ffi/nftables/types.ts's).
 *
 * @module
 */

/** An IP family, numbered as in the IP header's version field. */
export type IpFamily = 4 | 6;

/** The Kubernetes spelling of a family (Service `ipFamilies`, EndpointSlice `addressType`, metrics). */
export type IpFamilyLabel = "IPv4" | "IPv6";

/** Both families, IPv4 first. */
export const IP_FAMILIES: readonly IpFamily[] = [4, 6];

/** The nftables table family that holds `family`'s rules: 4 -> "ip", 6 -> "ip6". */
export function nftFamily(family: IpFamily): "ip" | "ip6" {
  return family === 4 ? "ip" : "ip6";
}

/** The Kubernetes label of `family`: 4 -> "IPv4", 6 -> "IPv6". */
export function familyLabel(family: IpFamily): IpFamilyLabel {
  return family === 4 ? "IPv4" : "IPv6";
}

/** The family a label or number names ("IPv6" and 6 -> 6; anything else -> 4). */
export function toIpFamily(f: IpFamily | IpFamilyLabel): IpFamily {
  return f === 6 || f === "IPv6" ? 6 : 4;
}

/**
 * The family of address or CIDR text already known to be valid, by its colon: a cheap test
 * for hot paths (use `ipFamily` from ip.ts to validate as well).
 */
export function familyOfText(text: string): IpFamily {
  return text.includes(":") ? 6 : 4;
}
