// Package feast is Feast's Redis online-store layout, byte for byte: entity keys, hash fields and
// serialized values (RedisKey, View and its rows, the *Value encoders), and Op, one write of a hash in
// that layout. It knows nothing of Redis clients or of backflow's features.
package feast
