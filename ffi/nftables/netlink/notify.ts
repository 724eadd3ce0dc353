/**
 * Decoding nf_tables change notifications (the NFNLGRP_NFTABLES multicast
 * group): per message only the header and the names that say which object
 * changed, and for NEWGEN the generation id and the committing process.
 * Pure; monitor.ts receives the bytes.
 *
 * A committed batch arrives as its per-object messages (coalesced into a few
 * skbs by the kernel) followed by one NEWGEN. Every message carries the port
 * id (nlmsg_pid) of the socket that sent the batch.
 *
 * @module
 */
import { align4, attributes, cstr, NFNL_HDRLEN, NLMSG_HDRLEN } from "../../netlink/message.ts";
import { NFNL_SUBSYS_NFTABLES } from "./nf_tables.ts";

/** What kind of object a notification is about. */
export type NotifiedKind = "table" | "chain" | "rule" | "set" | "element" | "gen" | "other";

/** One decoded notification. */
export interface NftNotification {
  /** The object the message is about. */
  kind: NotifiedKind;
  /** "del" for a deletion (DEL* and DESTROY*), else "new". */
  op: "new" | "del";
  /** Port id of the socket whose batch caused it (0: the kernel itself). */
  portid: number;
  /** NFPROTO_* family of the table. */
  family: number;
  /** Table name ("" for NEWGEN). */
  table: string;
  /** Chain (of a chain or rule) or set (of a set or element) name; "" otherwise. */
  name: string;
  /** NEWGEN: the ruleset generation id after the commit. */
  genId?: number;
  /** NEWGEN: the committing task's id and name (current->comm). */
  pid?: number;
  /** NEWGEN: the committing task's name. */
  proc?: string;
}

/** enum nf_tables_msg_types -> kind and op (DESTROY* notify as DEL* on current kernels). */
const TYPES: Record<number, [NotifiedKind, "new" | "del"]> = {
  0: ["table", "new"],
  2: ["table", "del"],
  3: ["chain", "new"],
  5: ["chain", "del"],
  6: ["rule", "new"],
  8: ["rule", "del"],
  9: ["set", "new"],
  11: ["set", "del"],
  12: ["element", "new"],
  14: ["element", "del"],
  15: ["gen", "new"],
  26: ["table", "del"],
  27: ["chain", "del"],
  28: ["rule", "del"],
  29: ["set", "del"],
  30: ["element", "del"],
};

/** Attribute number of the object's name, per kind (the table is attribute 1 for all of them). */
const NAME_ATTR: Partial<Record<NotifiedKind, number>> = {
  chain: 3, // NFTA_CHAIN_NAME
  rule: 2, // NFTA_RULE_CHAIN
  set: 2, // NFTA_SET_NAME
  element: 2, // NFTA_SET_ELEM_LIST_SET
};
const NFTA_TABLE = 1;
const NFTA_GEN_ID = 1, NFTA_GEN_PROC_PID = 2, NFTA_GEN_PROC_NAME = 3;

const be32 = (v: Uint8Array) =>
  v.length >= 4 ? new DataView(v.buffer, v.byteOffset, 4).getUint32(0, false) : 0;

/**
 * Decodes every nf_tables message in `buf[0, len)` (one receive). Messages of
 * other subsystems and malformed tails are skipped.
 */
export function decodeNotifications(buf: Uint8Array, len: number): NftNotification[] {
  const out: NftNotification[] = [];
  const view = new DataView(buf.buffer, buf.byteOffset, len);
  for (let off = 0; off + NLMSG_HDRLEN <= len;) {
    const mlen = view.getUint32(off, true);
    if (mlen < NLMSG_HDRLEN || off + mlen > len) break;
    const type = view.getUint16(off + 4, true);
    if (type >> 8 === NFNL_SUBSYS_NFTABLES && mlen >= NFNL_HDRLEN) {
      const [kind, op] = TYPES[type & 0xff] ?? ["other", "new"];
      const n: NftNotification = {
        kind,
        op,
        portid: view.getUint32(off + 12, true),
        family: buf[off + 16],
        table: "",
        name: "",
      };
      const nameAttr = NAME_ATTR[kind];
      attributes(buf, off + NFNL_HDRLEN, off + mlen, (t, v) => {
        if (kind === "gen") {
          if (t === NFTA_GEN_ID) n.genId = be32(v);
          else if (t === NFTA_GEN_PROC_PID) n.pid = be32(v);
          else if (t === NFTA_GEN_PROC_NAME) n.proc = cstr(v);
        } else if (t === NFTA_TABLE) n.table = cstr(v);
        else if (t === nameAttr) n.name = cstr(v);
      });
      out.push(n);
    }
    off += align4(mlen);
  }
  return out;
}
