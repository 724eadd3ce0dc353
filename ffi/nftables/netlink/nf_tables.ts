/**
 * nf_tables' netlink numbers (linux/netfilter/nf_tables.h, nfnetlink.h),
 * for the element codec, the reads and the set screen alike.
 *
 * @module
 */
import { NLM_F_REQUEST, putHeader } from "../../netlink/message.ts";

/** nfnetlink subsystem of nf_tables (the high byte of nlmsg_type). */
export const NFNL_SUBSYS_NFTABLES = 10;
/** Opens a batch (nlmsg_type without subsystem; res_id names the subsystem). */
export const NFNL_MSG_BATCH_BEGIN = 0x10;
/** Closes a batch. */
export const NFNL_MSG_BATCH_END = 0x11;

/** enum nf_tables_msg_types, the ones used here. */
export const NFT_MSG = {
  NEWTABLE: 0,
  DELTABLE: 2,
  NEWRULE: 6,
  GETRULE: 7,
  NEWSET: 9,
  GETSET: 10,
  NEWSETELEM: 12,
  GETSETELEM: 13,
  DELSETELEM: 14,
  NEWGEN: 15,
  GETGEN: 16,
} as const;

/** The nlmsg_type of nf_tables message `msg`. */
export function nftType(msg: number): number {
  return (NFNL_SUBSYS_NFTABLES << 8) | msg;
}

/** nfgenmsg family numbers (NFPROTO_*) of the nft families a table of ours can have. */
export const FAMILY_NUMBER: Readonly<Record<string, number>> = { ip: 2, ip6: 10, inet: 1 };

/** nft family names of every NFPROTO_* number (other programs' tables too). */
export const FAMILY_NAME: Readonly<Record<number, string>> = {
  1: "inet",
  2: "ip",
  3: "arp",
  5: "netdev",
  7: "bridge",
  10: "ip6",
};

/** Size of a batch begin or end message (nlmsghdr + nfgenmsg). */
export const BATCH_MARK_LEN = 20;

/**
 * Writes the message that begins or ends an nf_tables batch at `off`. NLM_F_ECHO in `flags` on
 * the begin message has the kernel send the commit's NEWGEN (its generation id) back to the
 * sender, whether or not anyone listens to the notification group.
 */
export function putBatchMark(
  dv: DataView,
  off: number,
  mark: "begin" | "end",
  seq: number,
  flags = NLM_F_REQUEST,
): void {
  const type = mark === "begin" ? NFNL_MSG_BATCH_BEGIN : NFNL_MSG_BATCH_END;
  putHeader(dv, off, BATCH_MARK_LEN, type, flags, seq, 0, NFNL_SUBSYS_NFTABLES);
}
