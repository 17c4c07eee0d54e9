//! [`Link`]: the connection every call of a store goes through, to one server (standalone, or the
//! primary a Sentinel named) or to a Redis Cluster, behind one `ConnectionLike`.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A multiplexed connection: cloned per call, every clone pipelining on the same sockets.
#[derive(Clone)]
pub(in crate::store::redis) enum Link {
    /// One server: standalone, or the primary a Sentinel named when the link was made.
    Server(MultiplexedConnection),
    /// A Redis Cluster: each command goes to the primary of its keys' slot; redis-rs follows
    /// MOVED and ASK and refreshes the slot map; `FUNCTION LOAD` and `SCRIPT LOAD` go to every
    /// primary.
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Link {
    /// Whether this is a cluster link (many connections, one per node).
    pub(in crate::store::redis) fn is_cluster(&self) -> bool {
        match self {
            Link::Server(_) => false,
            #[cfg(feature = "cluster")]
            Link::Cluster(_) => true,
        }
    }

    /// Runs `command` on the one server, or on a cluster's primary of `slot` (a keyless command
    /// that redis-rs would send to any node).
    #[cfg(feature = "regions")]
    pub(in crate::store::redis) async fn query_at<T: redis::FromRedisValue>(
        &mut self,
        command: &Cmd,
        slot: Option<u16>,
    ) -> redis::RedisResult<T> {
        match (self, slot) {
            #[cfg(feature = "cluster")]
            (Link::Cluster(connection), Some(slot)) => {
                use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                let value = connection
                    .route_command(command.clone(), RoutingInfo::SingleNode(route))
                    .await?;
                Ok(redis::from_redis_value(value)?)
            }
            (link, _) => command.query_async(link).await,
        }
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Server(connection) => connection.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Link::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Server(connection) => connection.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "cluster")]
            Link::Cluster(connection) => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Server(connection) => connection.get_db(),
            #[cfg(feature = "cluster")]
            Link::Cluster(connection) => connection.get_db(),
        }
    }
}
