/**
 * Rule counts per chain of one table, from a plain NETLINK_NETFILTER rule
 * dump. libnftables cannot list a table's rules without first loading every
 * element of its sets into its cache (`list table -t` and `list chain` both
 * do: 4.6 s and 300 MB for 200k map elements, libnftables 1.0.6), which would
 * make every periodic full sync pay for the whole ruleset. The dump carries
 * only the rules.
 *
 * @module
 */
import { cstr, walkDump } from "../../netlink/dump.ts";
import { align4, NLM_F_DUMP, NLM_F_REQUEST, putHeader } from "../../netlink/message.ts";
import { netfilterDump } from "../../netlink/socket.ts";
import { FAMILY_NUMBER, NFT_MSG, nftType } from "./nf_tables.ts";

const NFTA_RULE_TABLE = 1;
const NFTA_RULE_CHAIN = 2;

const enc = new TextEncoder();

/** NFT_MSG_GETRULE dump of one family, filtered to `table` (the kernel honours the filter). */
export function encodeRuleDumpRequest(family: string, table: string, seq: number): Uint8Array {
  const fam = FAMILY_NUMBER[family];
  if (fam === undefined) throw new Error(`rule dump: unknown family ${family}`);
  const name = enc.encode(table + "\0");
  const attrLen = 4 + name.length;
  const len = 20 + align4(attrLen);
  const b = new Uint8Array(len);
  const v = new DataView(b.buffer);
  putHeader(
    v,
    0,
    len,
    nftType(NFT_MSG.GETRULE),
    NLM_F_REQUEST | NLM_F_DUMP,
    seq,
    fam,
  );
  v.setUint16(20, attrLen, true);
  v.setUint16(22, NFTA_RULE_TABLE, true);
  b.set(name, 24);
  return b;
}

/**
 * Counts the rules of one receive buffer of a rule dump into `counts` (by
 * chain; rules of other tables are skipped). Returns "done" at NLMSG_DONE, an
 * errno (> 0) at an error, else "more".
 */
export function parseRuleDump(
  buf: Uint8Array,
  len: number,
  table: string,
  counts: Map<string, number>,
): "more" | "done" | number {
  return walkDump(buf, len, (type, _family, attrs) => {
    if ((type & 0xff) !== NFT_MSG.NEWRULE) return;
    let t = "", chain = "";
    attrs((atype, value) => {
      if (atype === NFTA_RULE_TABLE) t = cstr(value);
      else if (atype === NFTA_RULE_CHAIN) chain = cstr(value);
    });
    if (t === table && chain !== "") counts.set(chain, (counts.get(chain) ?? 0) + 1);
  });
}

/** Rules per chain of `family table` (chains without rules are absent). Synchronous, a few ms. */
export function dumpRuleCounts(family: string, table: string): Map<string, number> {
  const counts = new Map<string, number>();
  netfilterDump(
    "rule",
    encodeRuleDumpRequest(family, table, 1),
    (rx, got) => parseRuleDump(rx, got, table, counts),
  );
  return counts;
}
