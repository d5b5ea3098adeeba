//! Client connections: RPC records in, every request handled on its own
//! task, replies out as they finish.
//!
//! fernfs's own connection loop handles one connection's requests one at a
//! time and keeps every reply for sixty seconds to answer retransmissions,
//! a READ's data included (measured: the server grew by 1 GiB per GiB read,
//! and a 1 GiB page-cache budget ran out within one benchmark case). nfsd
//! serves a connection's requests on all its threads and caches no READ
//! replies. So the loop is this module's; the messages' XDR, the program
//! and procedure dispatch and every protocol handler are fernfs's.

use fernfs::protocol::nfs::{mount as mount_handlers, portmap as portmap_handlers, v3};
use fernfs::protocol::rpc::Context;
use fernfs::xdr::{self, deserialize, mount, nfs3, portmap, Serialize};
use std::io::{self, Cursor};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// The largest record taken: a 1 MiB WRITE with its headers, with room.
const MAX_RECORD: usize = 4 << 20;
/// RFC 5531's record marking: the high bit of a fragment's header says it
/// is the record's last.
const LAST_FRAGMENT: u32 = 1 << 31;

/// Serves `socket` until the client goes away.
pub async fn serve(socket: TcpStream, context: Context) {
    let _ = socket.set_nodelay(true);
    let (mut rd, mut wr) = socket.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        while let Some(reply) = rx.recv().await {
            let header = (reply.len() as u32 | LAST_FRAGMENT).to_be_bytes();
            if wr.write_all(&header).await.is_err() || wr.write_all(&reply).await.is_err() {
                break;
            }
        }
    });
    while let Ok(record) = read_record(&mut rd).await {
        let (context, tx) = (context.clone(), tx.clone());
        tokio::spawn(async move {
            if let Some(reply) = dispatch(&record, context).await {
                let _ = tx.send(reply);
            }
        });
    }
    drop(tx);
    let _ = writer.await;
}

async fn read_record(rd: &mut OwnedReadHalf) -> io::Result<Vec<u8>> {
    let mut record = Vec::new();
    loop {
        let header = rd.read_u32().await?;
        let len = (header & !LAST_FRAGMENT) as usize;
        if record.len() + len > MAX_RECORD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "RPC record too long"));
        }
        let start = record.len();
        record.resize(start + len, 0);
        rd.read_exact(&mut record[start..]).await?;
        if header & LAST_FRAGMENT != 0 {
            return Ok(record);
        }
    }
}

/// The reply to one call, or none (not a call, or a handler failed: the
/// client retransmits, as after a lost reply).
async fn dispatch(record: &[u8], mut context: Context) -> Option<Vec<u8>> {
    let mut input = Cursor::new(record);
    let msg: xdr::rpc::rpc_msg = deserialize(&mut input).ok()?;
    let xid = msg.xid;
    let xdr::rpc::rpc_body::CALL(call) = msg.body else { return None };
    if let xdr::rpc::auth_flavor::AUTH_UNIX = call.cred.flavor {
        context.auth = deserialize(&mut Cursor::new(&call.cred.body)).ok()?;
    }
    let mut out = Vec::new();
    let handled = if call.rpcvers != 2 {
        xdr::rpc::rpc_vers_mismatch(xid).serialize(&mut out).map_err(anyhow::Error::from)
    } else {
        match call.prog {
            nfs3::PROGRAM => v3::handle_nfs(xid, call, &mut input, &mut out, &context).await,
            mount::PROGRAM => mount_handlers::handle_mount(xid, call, &mut input, &mut out, &context).await,
            portmap::PROGRAM => portmap_handlers::handle_portmap(xid, &call, &mut input, &mut out, &mut context),
            _ => xdr::rpc::prog_unavail_reply_message(xid).serialize(&mut out).map_err(anyhow::Error::from),
        }
    };
    match handled {
        Ok(()) => Some(out),
        Err(e) => {
            eprintln!("dcnfsd: call {xid} from {} failed: {e}", context.client_addr);
            None
        }
    }
}
