import { describe, expect, it } from 'vitest';
import { DEFAULT_OCI_IMAGE } from '../../../../src/config/agent-config.js';
import { DEFAULT_NVIDIA_OCI_IMAGE, chooseImage } from '../../../../src/provision/oci/resolve-image.js';

const OWN = 'registry.corp.example/rootfs:v3';

describe('the image order', () => {
  it("1. takes the config's OCIImage over both variables and the GPU default", () => {
    const env = { AGENT_OCI_IMAGE: 'registry.corp.example/other:v1', AGENT_DISABLE_OCI_IMAGE: 'true' };
    expect(chooseImage(OWN, env, true)).toEqual({ ref: OWN, source: 'config' });
  });

  it('2. refuses AGENT_DISABLE_OCI_IMAGE (truthy as Go reads it) naming what to set instead', () => {
    for (const truthy of ['1', 't', 'T', 'true', 'TRUE', 'True']) {
      const env = { AGENT_DISABLE_OCI_IMAGE: truthy, AGENT_OCI_IMAGE: OWN };
      expect(() => chooseImage(DEFAULT_OCI_IMAGE, env, false), truthy).toThrow(
        expect.objectContaining({
          code: 'UNSUPPORTED',
          message: expect.stringMatching(
            /unset it, or name an image in AGENT_OCI_IMAGE or the config's OCIImage/,
          ),
        }),
      );
    }
    expect(() => chooseImage(DEFAULT_OCI_IMAGE, { AGENT_DISABLE_OCI_IMAGE: '1' }, true)).toThrow(
      DEFAULT_NVIDIA_OCI_IMAGE,
    );
  });

  it('2. reads a false AGENT_DISABLE_OCI_IMAGE as unset and refuses one that is no boolean', () => {
    for (const falsy of ['0', 'f', 'false', 'FALSE', '']) {
      expect(chooseImage(DEFAULT_OCI_IMAGE, { AGENT_DISABLE_OCI_IMAGE: falsy }, false).source).toBe(
        'default',
      );
    }
    expect(() => chooseImage(DEFAULT_OCI_IMAGE, { AGENT_DISABLE_OCI_IMAGE: 'yes' }, false)).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining('"yes"') }),
    );
  });

  it('3. takes AGENT_OCI_IMAGE when the config names no image, even on a GPU host', () => {
    expect(chooseImage(DEFAULT_OCI_IMAGE, { AGENT_OCI_IMAGE: OWN }, true)).toEqual({
      ref: OWN,
      source: 'AGENT_OCI_IMAGE',
    });
    expect(() => chooseImage(DEFAULT_OCI_IMAGE, { AGENT_OCI_IMAGE: 'Bad Ref' }, false)).toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        message: expect.stringMatching(/^AGENT_OCI_IMAGE: /),
      }),
    );
  });

  it('4. falls back to the default, and to its -nvidia variant on a host with NVIDIA devices', () => {
    expect(chooseImage(DEFAULT_OCI_IMAGE, {}, false)).toEqual({ ref: DEFAULT_OCI_IMAGE, source: 'default' });
    expect(chooseImage(DEFAULT_OCI_IMAGE, {}, true)).toEqual({
      ref: 'ghcr.io/azure/agent-ubuntu2404-nvidia:v20260427',
      source: 'default-nvidia',
    });
  });
});
