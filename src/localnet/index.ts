/**
 * The local network's public face: stand-ins of the chain and the platform a validator can rehearse
 * an epoch against (`trajrl-validator localnet`), also what the tests run against. Not a real chain.
 */
export {
  type FakeNeuronSpec,
  type FakeNodeOptions,
  type FakeSubnetSpec,
  FakeSubtensorNode,
  type FixtureName,
  type ReceivedExtrinsic,
  randomAccount,
} from "./chain-node.js";
export {
  LOCALNET_EPOCH_ID,
  LOCALNET_GENESIS_HASH,
  type Localnet,
  type LocalnetOptions,
  startLocalnet,
  weightsIncluded,
} from "./localnet.js";
export {
  type FakeEpoch,
  FakePlatform,
  type FakePlatformOptions,
  type FakeRoute,
  type Fault,
  type OpenEpochOptions,
  type Received,
} from "./platform.js";
