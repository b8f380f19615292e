/** Nothing global yet; Docker-backed suites check the engine themselves (see test/helpers/docker.ts). */
export default function setup(): void {}
