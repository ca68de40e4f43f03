// Package replay moves a consumer group's committed offsets to re-drive retained records
// through a stage, and does it safely. Start with Build, which turns a Request (group, scope,
// spec) into a Plan; Apply executes a plan; Status and Groups report on catch-up.
//
// The offset arithmetic follows Apache Kafka's kafka-consumer-groups --reset-offsets
// (GroupOffsetsResetter): the same specs give the same target offsets, and the export is the same
// CSV. What backflow adds:
//
//   - a plan shows for every partition the current and target offsets, the records to re-read
//     and the record timestamps at both ends, and warns where a point fell outside the retained
//     log and was clamped to its start or end;
//   - Apply refuses while the group has live members, naming them, and a group that does not
//     exist is an error unless the request says Create;
//   - --all-topics leaves out the group's own goka loopback topic (<group>-loop): re-reading it
//     would process forwarded records a second time;
//   - stage actions run with the offset move: Epoch bumps ingest's replay epoch in the control
//     topic before the move, FeatureReset rebuilds the feature aggregator's state after it;
//   - every executed replay is recorded (Recorder): in the control topic and in ClickHouse's
//     replay_log table.
//
// What a replay does to each stage's state is in docs/replay.md.
package replay
