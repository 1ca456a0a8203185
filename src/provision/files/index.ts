/** The files a machine needs: host facts, OS files, nspawn files, containerd/kubelet staging. */
export { readHostInfo } from './host-info.js';
export type { HostInfo } from './host-info.js';
export { writeOsFiles, renderOsFiles } from './os-files.js';
export {
  writeNspawnFiles,
  removeNspawnFiles,
  nspawnFileList,
  renderNspawnSettings,
  renderNspawnDropIn,
} from './nspawn-files.js';
export type { HostFilePlan } from './nspawn-files.js';
export { setStandbyBoot, bootsIntoStandby, STANDBY_TARGET } from '../../host/standby-boot.js';
export { writeStagingFiles, renderStagingFiles, stagedFileList } from './staging-files.js';
export type { StagedFile } from './staging-files.js';
export type { RootfsEntry, RootfsFile, RootfsSymlink } from './rootfs-entry.js';
export { IN_MACHINE, ROOTFS_FILES, kubernetesVersionLine } from './rootfs-layout.js';
